"""``ClusterProbe``: every Ray node's GPUs and host RAM, read by one small actor per node.

A GpuProbe like NvmlProbe or FakeGpuProbe (resources.py), so the scheduler's Sampler
uses it unchanged: ``read()`` returns one GpuReading whose GPUs are keyed by
:class:`~evaltui.scheduler.cluster.keys.NodeGpu`. Each node's :class:`NodeProbe` actor (no
CPU reserved, pinned to its node) runs the same ``make_gpu_probe()`` as a one-machine
scheduler in that node's environment: NVML where present, fake GPUs when the node's
raylet was started with ``EVALTUI_FAKE_GPUS`` (a test declares them per node that way).

A read never stalls the tick: it takes the answers that came since the last read and asks
again (so a reading is at most one tick old; only the first read waits, at most
``first_timeout_sec``), and uses each node's last answer while it is younger than
``stale_sec``; a
node gone from the cluster (or whose actor died) drops out of the reading at once, so
nothing new is admitted there. "Gone" is the executor's own rule
(:mod:`evaltui.engine.executor.ray.liveness`: its raylet unanswered for 2 s, or Ray no
longer lists it), not Ray's ~15 s verdict, so a run on a lost node is ``no_node`` (moved,
scheduler/runs/moving.py) as soon as its episodes are retried. Per-process usage
is not reported (PIDs of other machines mean nothing here). The probe also holds this
scheduler's handle on the cluster ledger (cluster/ledger.py): ``sync`` once per tick
(answered by the next tick: the entries it brings may be a tick old, which never
over-commits because ``reserve`` checks again in the ledger), ``reserve`` per admission.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import asdict
from typing import Any

from evaltui.engine.executor.ray.fateshare import follow_raylet
from evaltui.engine.executor.ray.liveness import NodeLiveness
from evaltui.engine.executor.ray.resources import RUN_ID_ENV
from evaltui.scheduler.admission.gpukey import NodeGpu, base_run, part_id
from evaltui.scheduler.admission.resources import (
    GpuReading,
    GpuSnapshot,
    HostProbe,
    HostSnapshot,
    make_gpu_probe,
)
from evaltui.scheduler.cluster.keys import NODE_NAME_ENV, ClusterReservation
from evaltui.scheduler.cluster.ledger import LEASE_SEC, NAMESPACE, connect

log = logging.getLogger(__name__)


class NodeProbe:
    """The actor on one node: its GPUs (as a one-machine scheduler reads them) and RAM."""

    def __init__(self) -> None:

        follow_raylet()  # orphaned by a dead raylet, nothing could end it
        self.gpu = make_gpu_probe()
        self.host = HostProbe()

    def read(self) -> dict[str, Any]:
        reading = self.gpu.read()
        return {"name": os.environ.get(NODE_NAME_ENV), "available": reading.available,
                "reason": reading.reason, "fake": reading.fake,
                "gpus": [(g.index, g.name, g.total_mb, g.used_mb, g.free_mb,
                          g.utilization_pct, runs_on(g)) for g in reading.gpus],
                "host": asdict(self.host.read())}


def runs_on(gpu: GpuSnapshot) -> dict[str, int] | None:
    """MiB per run id on ``gpu``: its processes grouped by the ``EVALTUI_RAY_RUN_ID`` in
    their environment (a pinned run's actors carry it). None if the GPU cannot attribute
    memory to processes."""
    if gpu.processes is None:
        return None
    runs: dict[str, int] = {}
    for p in gpu.processes:
        run_id = _run_id_of(p.pid)
        if run_id:
            runs[run_id] = runs.get(run_id, 0) + p.used_mb
    return runs


def _run_id_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            environ = fh.read()
    except OSError:  # gone, or another user's
        return None
    prefix = RUN_ID_ENV.encode() + b"="
    for item in environ.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode(errors="replace")
    return None


class ClusterProbe:
    """Per-node readings merged into one GpuReading (see the module docstring)."""

    def __init__(self, address: str, *, timeout_sec: float = 0.0, first_timeout_sec: float
                 = 20.0, stale_sec: float = 5.0, lease_sec: float = LEASE_SEC,
                 scheduler_id: str | None = None) -> None:
        # optional: ray (the ray extra)
        import ray

        self.address = address
        self.timeout_sec, self.first_timeout_sec = timeout_sec, first_timeout_sec
        self.stale_sec, self.lease_sec = stale_sec, lease_sec
        self.scheduler_id = scheduler_id or f"{os.uname().nodename}:{os.getpid()}:" \
                                            f"{uuid.uuid4().hex[:8]}"
        self._ray = ray
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            # Ray replaces SIGTERM/SIGINT handlers on init; serve's own are put back.
            saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
            ray.init(address=address, namespace=NAMESPACE, log_to_driver=False,
                     logging_level=logging.WARNING)
            if threading.current_thread() is threading.main_thread():
                for sig, handler in saved.items():
                    if handler is not None:
                        signal.signal(sig, handler)
        self.ledger = connect(ray)
        self.liveness = NodeLiveness().start()
        self._lock = threading.Lock()
        self._actors: dict[str, Any] = {}
        self._pending: dict[str, Any] = {}
        self._last: dict[str, tuple[float, dict[str, Any]]] = {}
        self._held: dict[str, ClusterReservation] = {}
        self._entries: list[ClusterReservation] = []
        self._sync_ref: Any = None
        self._sync_sent = 0.0
        self._synced = False
        self.hosts: dict[str, HostSnapshot] = {}
        """Host RAM/CPU per node name, as of the last reading."""
        self.alive: set[str] | None = None
        """Ids of the nodes alive at the last read: listed by Ray and not lost by the
        liveness rule (None: not read yet)."""
        self.unplaced: dict[str, ClusterReservation] = {}
        """Runs of this scheduler whose node left and that no GPU could take yet: their
        reservation there, released (runs/moving.py)."""
        self.lost: dict[str, float] = {}
        """Nodes that were read and then left the cluster: name -> when (time.time()).
        Shown as gone until a node of that name answers again."""

    # ---- GpuProbe ---------------------------------------------------------------------
    def read(self) -> GpuReading:
        with self._lock:
            return self._read()

    def close(self) -> None:
        with self._lock:
            for actor in self._actors.values():
                self._ray.kill(actor, no_restart=True)
            self._actors.clear()
            self.liveness.close()
            if self._held:
                try:
                    self._ray.get(self.ledger.release.remote(self.scheduler_id,
                                                             list(self._held)), timeout=5)
                except Exception:  # the lease runs out by itself
                    log.warning("cluster ledger: release on close failed", exc_info=True)
                self._held.clear()
            if self._owns_ray:
                self._ray.shutdown()

    # ---- ledger -----------------------------------------------------------------------
    def sync(self, live: set[str]) -> None:
        """Renew this scheduler's lease, keep only the reservations of ``live`` runs, and
        fetch every scheduler's reservations (once per tick)."""
        with self._lock:
            self._held = {k: r for k, r in self._held.items()
                          if base_run(k) in live or time.time() - r.at < 3.0}
            self.unplaced = {k: r for k, r in self.unplaced.items() if base_run(k) in live}
            if self._sync_ref is not None:
                self._collect_sync(wait=0.0 if self._synced else 5.0)
            if self._sync_ref is None:
                self._sync_sent = time.time()
                self._sync_ref = self.ledger.sync.remote(
                    self.scheduler_id, [asdict(r) for r in self._held.values()],
                    self.lease_sec)
                if not self._synced:  # the first tick decides on every scheduler's entries
                    self._collect_sync(wait=5.0)

    def _collect_sync(self, wait: float) -> None:
        """Take the sync's answer if it came (lock held): every scheduler's entries as of
        its sending, plus this scheduler's reservations made since."""
        ready, _ = self._ray.wait([self._sync_ref], timeout=wait)
        if not ready:
            if time.time() - self._sync_sent > 5.0:
                log.warning("cluster ledger: no answer to a sync for 5 s; asking again")
                self._sync_ref = None
            return
        ref, self._sync_ref = self._sync_ref, None
        try:
            raw = self._ray.get(ref)
        except Exception as exc:  # cannot see the ledger: keep the last entries
            log.warning("cluster ledger: sync failed: %s", exc)
            return
        entries = [ClusterReservation.from_json(r) for r in raw]
        for e in entries:  # further GPUs of an adopted run with replicas, handed over
            if e.scheduler == self.scheduler_id and e.run_id not in self._held and \
                    e.run_id not in self.unplaced and base_run(e.run_id) in self._held:
                self._held[e.run_id] = e
        have = {(e.scheduler, e.run_id) for e in entries}
        self._entries = entries + [r for r in self._held.values() if r.at >= self._sync_sent
                                   and (self.scheduler_id, r.run_id) not in have]
        self._synced = True

    def holds(self) -> bool:
        """This scheduler still has reservations on the cluster (to release by ``sync``),
        or runs to move off a node that left."""
        return bool(self._held or self.unplaced)

    def adopt(self, run_id: str, node_id: str, index: int, vram_mb: int, exclusive: bool,
              node: str) -> None:
        """Hold the reservation of a run adopted from a scheduler that died: the next
        sync puts it back in the ledger (op ``restore``) before that scheduler's lease
        runs out, so the GPU is never free to others meanwhile."""
        with self._lock:
            self._held.setdefault(run_id, ClusterReservation(
                self.scheduler_id, run_id, node_id, index, vram_mb, exclusive, time.time(),
                node))

    def displaced(self) -> list[ClusterReservation]:
        """This scheduler's runs on nodes that left the cluster, and those still waiting
        for another GPU (oldest reservation first)."""
        with self._lock:
            if self.alive is None:
                return []
            lost = self.liveness.lost()  # now, not as of the last reading
            gone = [r for r in self._held.values()
                    if r.node_id not in self.alive or r.node_id in lost]
            return sorted([*gone, *self.unplaced.values()], key=lambda r: r.at)

    def unplace(self, r: ClusterReservation) -> None:
        """Release ``r`` (its node left) and keep the run in ``unplaced`` until moved."""
        with self._lock:
            self._held.pop(r.run_id, None)
            self.unplaced.setdefault(r.run_id, r)
        try:
            self._ray.get(self.ledger.release.remote(self.scheduler_id, [r.run_id]), timeout=5)
        except Exception as exc:  # the next sync drops it: the run is no longer held
            log.warning("cluster ledger: release of %s failed: %s", r.run_id, exc)

    def entries(self) -> list[ClusterReservation]:
        return list(self._entries)

    def reserve(self, run_id: str, key: NodeGpu, vram_mb: int, exclusive: bool,
                free_mb: int) -> str | None:
        """Check and reserve in one ledger call: None when granted, else why not."""
        return self.reserve_all(run_id, [(key, free_mb)], vram_mb, exclusive)

    def reserve_all(self, run_id: str, gpus: Sequence[tuple[NodeGpu, int]], vram_mb: int,
                    exclusive: bool) -> str | None:
        """Reserve ``vram_mb`` on every (GPU, measured free) of ``gpus`` in one ledger call
        (a run with replicas: all or none; its parts under ``part_id``)."""
        try:
            refused = self._ray.get(self.ledger.reserve_all.remote(
                self.scheduler_id, run_id,
                [[k.node_id, k.index, free, k.node] for k, free in gpus], vram_mb,
                exclusive, self.lease_sec), timeout=5)
        except Exception as exc:
            return f"cluster ledger unreachable: {exc}"
        if refused is None:
            now = time.time()
            held = {part_id(run_id, part): ClusterReservation(
                self.scheduler_id, part_id(run_id, part), k.node_id, k.index, vram_mb,
                exclusive, now, k.node) for part, (k, _) in enumerate(gpus)}
            with self._lock:
                self._held.update(held)
                for rid in held:
                    self.unplaced.pop(rid, None)
                self._entries = [e for e in self._entries if (e.scheduler, e.run_id) not in
                                 {(self.scheduler_id, rid) for rid in held}] + list(held.values())
        return refused

    # ---- reading ----------------------------------------------------------------------
    def _read(self) -> GpuReading:
        ray = self._ray
        try:
            nodes = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}
        except Exception as exc:
            return GpuReading(False, f"Ray cluster unreachable: {exc}", False, ())
        for lost in self.liveness.lost():  # Ray lists it for ~15 s more
            nodes.pop(lost, None)
        self.alive = set(nodes)
        for gone in [n for n in self._actors if n not in nodes]:
            self._forget(gone, gone=True)
        for node_id in nodes:
            if node_id not in self._actors:
                self._actors[node_id] = self._spawn(node_id)
            if node_id not in self._pending:
                self._pending[node_id] = self._actors[node_id].read.remote()
        refs = list(self._pending.values())
        timeout = self.timeout_sec if self._last else self.first_timeout_sec
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        done = set(ready)
        now = time.monotonic()
        for node_id, ref in list(self._pending.items()):
            if ref not in done:
                continue
            del self._pending[node_id]
            try:
                self._last[node_id] = (now, ray.get(ref))
            except Exception as exc:  # the actor died: a fresh one next read
                log.warning("node probe on %s failed: %s", node_id[:8], exc)
                self._forget(node_id)
        return self._merge(now)

    def _merge(self, now: float) -> GpuReading:
        gpus: list[GpuSnapshot] = []
        reasons, fake = [], False
        for node_id, (at, data) in sorted(self._last.items()):
            if now - at > self.stale_sec:
                continue
            name = data.get("name") or f"node-{node_id[:6]}"
            self.hosts[name] = HostSnapshot(**data["host"])
            self.lost.pop(name, None)
            if not data["available"]:
                reasons.append(f"{name}: {data['reason']}")
                continue
            fake = fake or bool(data["fake"])
            for index, gname, total, used, free, util, runs in data["gpus"]:
                gpus.append(GpuSnapshot(NodeGpu(node_id, index, name),
                                        f"{name} · {gname}", total, used, free, util, None,
                                        runs))
        if not gpus:
            why = "; ".join(reasons) or "no node of the Ray cluster answered"
            return GpuReading(False, f"no GPU on the cluster ({why})", False, ())
        return GpuReading(True, None, fake, tuple(gpus))

    def _spawn(self, node_id: str) -> Any:
        # optional: ray (the ray extra)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return self._ray.remote(NodeProbe).options(
            num_cpus=0, max_restarts=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
                node_id, soft=False)).remote()

    def _forget(self, node_id: str, gone: bool = False) -> None:
        actor = self._actors.pop(node_id, None)
        self._pending.pop(node_id, None)
        last = self._last.pop(node_id, None)
        if gone and last is not None:
            name = last[1].get("name") or f"node-{node_id[:6]}"
            self.lost[name] = time.time()
            self.hosts.pop(name, None)
        if actor is not None:
            with suppress(Exception):  # its node is gone with it
                self._ray.kill(actor, no_restart=True)


class ClusterUnavailable(RuntimeError):
    """``--ray ADDRESS`` cannot be used: ray missing, or the cluster does not answer."""


def open_cluster(address: str) -> ClusterProbe:
    """The probe of ``evaltui serve --ray`` / ``evaltui --ray``; ClusterUnavailable with
    the one line to print otherwise."""
    try:
        # optional: ray (the ray extra)
        import ray  # noqa: F401
    except ImportError:
        raise ClusterUnavailable("--ray needs ray: install evaltui[ray]") from None
    try:
        return ClusterProbe(address)
    except Exception as exc:  # ConnectionError, version mismatch, auth
        raise ClusterUnavailable(f"cannot connect to the Ray cluster at {address}: "
                                 f"{type(exc).__name__}: {exc}") from exc
