"""The cluster-wide reservation ledger: one detached named Ray actor per cluster.

Every scheduler using the cluster (``evaltui serve --ray``, the TUI with ``--ray``)
reserves through the same actor, ``evaltui-ledger`` in namespace ``evaltui``. The check
and the reservation are one actor call (:meth:`LedgerActor.reserve`), and an actor runs
its calls one at a time, so two schedulers that both decided to put a job on one GPU
cannot both get it: the second is refused and its job waits another tick.

Reservations are keyed by (scheduler id, run id); a run with replicas holds one per GPU,
the first under its run id and the others under ``RUN#1``, ``RUN#2``, ... (all taken in
one call, :meth:`LedgerActor.reserve_all`: all or none). A scheduler renews its lease on every
tick (:meth:`LedgerActor.sync`, which also drops its reservations of runs no longer
live); the reservations of a scheduler whose lease expired (it died, or lost the
cluster) are purged by the next call of anyone, as stale entries are on one machine.
A scheduler that adopts a live run from one that died (``evaltui serve`` restarted) lists
it in its next sync: the dead scheduler's entry for that run is handed over (op
``handover`` then ``restore``) rather than counted twice until its lease runs out; the
further GPUs of a run with replicas go with it.
Every admit, release, handover, restore and purge is kept in an in-actor audit list
(``audit()``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, replace
from typing import Any

from evaltui.engine.executor.ray.fateshare import follow_raylet
from evaltui.engine.executor.ray.resources import LEDGER_NAME, LEDGER_NAMESPACE
from evaltui.scheduler.admission.gpukey import NodeGpu, base_run, gpu_label, part_id
from evaltui.scheduler.cluster.keys import ClusterReservation

NAMESPACE = LEDGER_NAMESPACE
LEASE_SEC = 10.0
GRACE_SEC = 3.0
"""A reservation this young survives a sync that does not list its run (spawn in flight)."""
AUDIT_MAX = 100_000


class LedgerActor:
    """The actor's state: reservations, leases, the audit list. Plain class: made remote
    by :func:`connect`, tested directly too."""

    def __init__(self) -> None:

        follow_raylet()  # orphaned by a dead raylet it would run on; Ray restarts it elsewhere
        self._res: dict[tuple[str, str], ClusterReservation] = {}
        self._lease: dict[str, float] = {}
        self._audit: list[dict[str, Any]] = []

    def sync(self, scheduler: str, live: list[dict[str, Any]], lease_sec: float = LEASE_SEC
             ) -> list[dict[str, Any]]:
        """Renew ``scheduler``'s lease; its reservations become ``live`` (those of runs it
        still holds: others are released, missing ones put back, so a ledger restarted
        empty on another node learns them again); purge expired schedulers. Returns every
        reservation now."""
        now = time.time()
        self._lease[scheduler] = now + lease_sec
        held = {r["run_id"]: r for r in live}
        for key, r in list(self._res.items()):
            if r.scheduler == scheduler and r.run_id not in held and now - r.at > GRACE_SEC:
                self._drop(key, "release", now)
        for run_id, raw in held.items():
            if (scheduler, run_id) not in self._res:
                # A run adopted from a scheduler that died: one run, one reservation.
                for key in [k for k in self._res if k[1] == run_id]:
                    self._drop(key, "handover", now)
                r = ClusterReservation.from_json({**raw, "scheduler": scheduler})
                self._res[(scheduler, run_id)] = r
                self._record("restore", r, now)
                self._hand_over_parts(scheduler, run_id, now)
        self._purge(now)
        return [asdict(r) for r in self._res.values()]

    def reserve(self, scheduler: str, run_id: str, node_id: str, index: int, vram_mb: int,
                exclusive: bool, free_mb: int, name: str = "",
                lease_sec: float = LEASE_SEC) -> str | None:
        """Reserve ``vram_mb`` on (node, GPU) if it fits in ``free_mb`` (measured) minus
        every reservation there, with the exclusivity rules; None, or why not."""
        return self.reserve_all(scheduler, run_id, [[node_id, index, free_mb, name]],
                                vram_mb, exclusive, lease_sec)

    def reserve_all(self, scheduler: str, run_id: str, gpus: list[list[Any]], vram_mb: int,
                    exclusive: bool, lease_sec: float = LEASE_SEC) -> str | None:
        """Reserve ``vram_mb`` on every one of ``gpus`` ([node id, index, measured free,
        name], a run with replicas: the first under ``run_id``, the others under
        ``RUN#part``) in this one call, or on none: None, or why the first refused GPU
        cannot take it."""
        now = time.time()
        self._lease[scheduler] = now + lease_sec
        self._purge(now)
        ids = [part_id(run_id, part) for part in range(len(gpus))]
        for rid, (node_id, index, free_mb, name) in zip(ids, gpus, strict=True):
            refused = self._refusal((scheduler, rid), node_id, index, vram_mb, exclusive,
                                    free_mb, name)
            if refused is not None:
                return refused
        for rid, (node_id, index, _, name) in zip(ids, gpus, strict=True):
            if (scheduler, rid) in self._res:  # moved: its node left the cluster
                self._drop((scheduler, rid), "release", now)
            r = ClusterReservation(scheduler, rid, node_id, index, vram_mb, exclusive, now,
                                   name)
            self._res[(scheduler, rid)] = r
            self._record("admit", r, now)
        return None

    def _refusal(self, key: tuple[str, str], node_id: str, index: int, vram_mb: int,
                 exclusive: bool, free_mb: int, name: str) -> str | None:
        here = [r for k, r in self._res.items()
                if (r.node_id, r.index) == (node_id, index) and k != key]
        label = gpu_label(NodeGpu(node_id, index, name))
        if exclusive and here:
            return f"{label} is in use ({len(here)} reservation(s)), not exclusive"
        held = next((r for r in here if r.exclusive), None)
        if held is not None:
            return f"{label} is in exclusive use by {base_run(held.run_id)}"
        left = free_mb - sum(r.vram_mb for r in here)
        if vram_mb > left:
            return (f"needs {vram_mb / 1024:.1f} GiB; {label} has "
                    f"{max(0, left) / 1024:.1f} GiB free after reservations")
        return None

    def _hand_over_parts(self, scheduler: str, run_id: str, now: float) -> None:
        """The further GPUs (``RUN#i``) of a run with replicas adopted by ``scheduler``
        are its now too (its next sync lists them: it learns them from this answer)."""
        for key in [k for k in self._res if k[0] != scheduler and k[1] != run_id
                    and base_run(k[1]) == run_id]:
            part = self._res.pop(key)
            self._record("handover", part, now)
            moved = replace(part, scheduler=scheduler)
            self._res[(scheduler, part.run_id)] = moved
            self._record("restore", moved, now)

    def release(self, scheduler: str, run_ids: Iterable[str]) -> None:
        now = time.time()
        for run_id in run_ids:
            if (scheduler, run_id) in self._res:
                self._drop((scheduler, run_id), "release", now)

    def placement(self, run_id: str) -> dict[str, Any] | None:
        """Where ``run_id`` is reserved now (the run follows it when its node leaves)."""
        here = [r for r in self._res.values() if r.run_id == run_id]
        return asdict(max(here, key=lambda r: r.at)) if here else None

    def entries(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self._res.values()]

    def audit(self, since: int = 0) -> list[dict[str, Any]]:
        """Audit records from position ``since`` (each: op, reservation, per-GPU totals
        and exclusive holders right after it)."""
        return self._audit[since:]

    def _purge(self, now: float) -> None:
        dead = {s for s, until in self._lease.items() if until < now}
        for s in dead:
            del self._lease[s]
        for key, r in list(self._res.items()):
            if r.scheduler in dead or r.scheduler not in self._lease:
                self._drop(key, "purge", now)

    def _drop(self, key: tuple[str, str], op: str, now: float) -> None:
        self._record(op, self._res.pop(key), now)

    def _record(self, op: str, r: ClusterReservation, now: float) -> None:
        gpu = (r.node_id, r.index)
        here = [x for x in self._res.values() if (x.node_id, x.index) == gpu]
        self._audit.append({"t": now, "op": op, **asdict(r),
                            "reserved_after": sum(x.vram_mb for x in here),
                            "holders_after": len(here),
                            "exclusive_after": any(x.exclusive for x in here)})
        if len(self._audit) > AUDIT_MAX:
            del self._audit[: AUDIT_MAX // 10]


def connect(ray: Any) -> Any:
    """The cluster's ledger actor, created (detached) by the first scheduler to ask.

    It lives on the head node when Ray says which that is: a worker node may leave, and
    a ledger restarted elsewhere would start empty (the schedulers' syncs restore their
    reservations, but the audit kept so far would be lost)."""
    return ray.remote(LedgerActor).options(
        name=LEDGER_NAME, namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
        num_cpus=0, max_restarts=-1, max_concurrency=1, **_on_head(ray)).remote()


def _on_head(ray: Any) -> dict[str, Any]:
    # optional: ray (the ray extra)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        head = next(n["NodeID"] for n in ray.nodes() if n.get("Alive")
                    and "node:__internal_head__" in n.get("Resources", {}))
    except Exception:  # StopIteration, or an older Ray: anywhere will do
        return {}
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(head, soft=True)}
