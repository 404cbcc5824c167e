"""Admission as a pure function: queued jobs + resource views -> who starts, who waits and why.

Jobs are taken in queue order (priority, then age; DESIGN §6). For each:

1. the interactive lock admits nothing;
2. per measured resource, the estimate must fit in measured free minus outstanding
   reservations (host RAM always; the GPU's memory when GPUs are measured);
3. an ``exclusive_gpu`` job starts only on a GPU nothing else runs on. While it waits it
   *claims* one GPU (the one closest to idle): jobs behind it in the queue may not start
   there, so a stream of small jobs cannot starve it. A job that has waited longer than
   ``claim_after_sec`` for memory claims its GPU the same way, so big jobs are not starved
   either. Jobs ahead of it (higher priority) are not held back.

A run with replicas (``Candidate.replicas``) takes several GPUs at once, one replica on
each, under the same rules per GPU (spread.py).

CPU cores are admitted like memory (cores.py): a job whose cores do not fit in the
host's cores minus reservations waits ("needs 4 cores, 1 free after reservations"). Cores
bound how many jobs share the machine, not whether a lone one starts: a job needing more
cores than the machine has is admitted when nothing else holds cores, with a ``note``
saying it oversubscribes.

A non-exclusive job goes on the GPU where it fits most tightly (best fit), which keeps
whole GPUs free for big and exclusive jobs. Within one tick, each admission is charged
against the views, so a tick never over-admits. Nothing here touches processes or files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from evaltui.contract.units import gib
from evaltui.engine.graph.replicas import ReplicaAsk
from evaltui.scheduler.admission.accounting import GpuView, HostView
from evaltui.scheduler.admission.cores import cores_text
from evaltui.scheduler.admission.gpukey import GpuKey, gpu_label, on_node
from evaltui.scheduler.admission.spread import TickViews, choose, claim_targets, too_big


class WaitKind(StrEnum):
    """Why a job is not admitted (the category; the text is in ``Wait.reason``)."""

    LOCK = "lock"
    """The interactive lock is held."""
    HOST_RAM = "host_ram"
    """Not enough host RAM after reservations."""
    CPU = "cpu"
    """Not enough CPU cores after reservations."""
    GPU_MEMORY = "gpu_memory"
    """No GPU has enough memory after reservations."""
    EXCLUSIVE = "exclusive"
    """An exclusive job waits for its GPU to empty, or GPUs are in exclusive use."""
    BEHIND = "behind"
    """Held back behind a waiting job's claim (no starvation)."""
    TOO_BIG = "too_big"
    """Needs more than the machine has at all; it will never start as is."""
    LOADING = "loading"
    """Admitted; the shared nodesets it uses are being loaded before it is spawned."""
    BUILDING = "building"
    """Its nodesets' own Python environments are being built; not a candidate yet."""
    NO_NODE = "no_node"
    """On a Ray cluster: no node's GPU can take it now (memory, or none answering)."""
    DISK_FULL = "disk_full"
    """Admitted, but its run dir could not be written (a full disk): tried again later."""
    LEDGER = "ledger"
    """The reservation ledger cannot be stored (its disk is full or read-only): nothing
    is admitted until a reservation can be made durable (fail closed)."""


@dataclass(frozen=True)
class Candidate:
    """A queued job as admission sees it."""

    run_id: str
    vram_mb: int
    ram_mb: int
    exclusive: bool = False
    needs_gpu: bool = True
    """Place it on a GPU (even at 0 MiB, to measure it); False = known not to use VRAM."""
    waiting_since: float = 0.0
    """``time.time()`` it was queued (for claims of long-waiting jobs)."""
    replicas: ReplicaAsk | None = None
    """A run with replicas: one replica per GPU on several GPUs (spread.py); ``vram_mb``
    is then what each GPU must fit. None: one GPU, as ever."""
    cpus: float = 0.0
    """CPU cores it reserves (workers x cores per worker; 0: none counted)."""


@dataclass(frozen=True)
class Admission:
    """Start this job (on ``gpu``, or on no particular GPU)."""

    run_id: str
    gpu: GpuKey | None
    gpus: tuple[GpuKey, ...] = ()
    """A run with replicas: every GPU it starts on, in the order chosen (``gpu`` is the
    first); empty for a one-GPU job."""
    note: str | None = None
    """Said once where it starts: it alone needs more cores than the machine has."""


@dataclass(frozen=True)
class Wait:
    """This job waits; ``reason`` is for humans."""

    run_id: str
    kind: WaitKind
    reason: str


def decide(candidates: Sequence[Candidate], gpus: Sequence[GpuView] | None, host: HostView, *,
           lock_reason: str | None = None, now: float = 0.0, claim_after_sec: float = 120.0
           ) -> tuple[list[Admission], dict[str, Wait]]:
    """Admissions in queue order, and a Wait for every job not admitted."""
    if lock_reason is not None:
        return [], {c.run_id: Wait(c.run_id, WaitKind.LOCK, lock_reason) for c in candidates}
    admits: list[Admission] = []
    waits: dict[str, Wait] = {}
    host_free = host.available_mb
    gpu_list = list(gpus or ())
    free = {g.index: g.available_mb for g in gpu_list}
    runs = {g.index: g.runs for g in gpu_list}
    holder = {g.index: g.exclusive_run for g in gpu_list}
    claims: dict[GpuKey, tuple[str, bool]] = {}  # gpu -> (run_id, exclusive) of the claimant
    largest = max(gpu_list, key=lambda g: g.total_mb, default=None)
    # GPUs open to the next job: recomputed only when a claim or an admission changed them
    # (a thousand queued jobs are checked every tick).
    stale = True
    open_gpus: list[GpuKey] = []
    usable: list[GpuKey] = []
    blocked: Wait | None = None
    views = TickViews(gpu_list, free, runs, holder, claims)
    cores = _Cores(host, now, claim_after_sec)
    counted = 0  # admissions already charged to ``cores``
    last: Candidate | None = None

    for c in candidates:
        if len(admits) > counted:  # the candidate before this one was admitted
            assert last is not None
            cores.take(last)
            counted = len(admits)
        last = c
        cpu_wait = cores.wait(c)
        if cpu_wait is not None:
            waits[c.run_id] = cpu_wait
            continue
        if c.ram_mb > host.ram_total_mb:
            waits[c.run_id] = Wait(c.run_id, WaitKind.TOO_BIG, f"needs {gib(c.ram_mb)} host RAM, "
                                   f"more than the host has ({gib(host.ram_total_mb)})")
            continue
        if not gpu_list or not (c.needs_gpu or c.exclusive):
            # No measured GPU (or the job uses none): host resources only.
            if c.ram_mb > host_free:
                waits[c.run_id] = _ram_wait(c, host_free)
                continue
            host_free -= c.ram_mb
            admits.append(Admission(c.run_id, None))
            continue
        assert largest is not None
        if c.replicas is not None:
            got = _spread(c, views, host_free, now - c.waiting_since >= claim_after_sec)
            if isinstance(got, Wait):
                waits[c.run_id] = got
            else:
                host_free -= c.ram_mb
                admits.append(Admission(c.run_id, got[0], got))
            stale = True  # a claim or an admission changed the GPUs
            continue
        if c.vram_mb > largest.total_mb:
            waits[c.run_id] = Wait(c.run_id, WaitKind.TOO_BIG, f"needs {gib(c.vram_mb)}, more "
                                   f"than any GPU has (largest: {gpu_label(largest.index)}, "
                                   f"{gib(largest.total_mb)})")
            continue
        if stale:
            open_gpus = [g.index for g in gpu_list if g.index not in claims]
            usable = [i for i in open_gpus if holder[i] is None]
            blocked, stale = None, False
        if c.exclusive:
            ready = [i for i in open_gpus if runs[i] == 0 and holder[i] is None
                     and free[i] >= c.vram_mb]
            if ready and c.ram_mb <= host_free:
                gpu = max(ready, key=lambda i: free[i])
                admits.append(Admission(c.run_id, gpu))
                views.charge(gpu, c.vram_mb, c.run_id)
                host_free -= c.ram_mb
                stale = True
                continue
            if not open_gpus:
                claimant, claimant_exclusive = next(iter(claims.values()))
                waits[c.run_id] = Wait(c.run_id, WaitKind.BEHIND,
                                       _behind(claimant, claimant_exclusive))
                continue
            target = min(open_gpus, key=lambda i: (runs[i], -free[i]))
            claims[target] = (c.run_id, True)
            stale = True
            views.changed()
            waits[c.run_id] = _exclusive_wait(c, target, runs[target], free[target], host_free)
            continue
        fits = [i for i in usable if free[i] >= c.vram_mb]
        if fits and c.ram_mb <= host_free:
            gpu = min(fits, key=lambda i: (free[i], i))  # best fit
            admits.append(Admission(c.run_id, gpu))
            views.charge(gpu, c.vram_mb, None)
            host_free -= c.ram_mb
            continue
        if fits:
            waits[c.run_id] = _ram_wait(c, host_free)
            continue
        if not usable:
            if blocked is None:
                blocked = _blocked(c, gpu_list, claims, holder)
            waits[c.run_id] = Wait(c.run_id, blocked.kind, blocked.reason)
            continue
        target = max(usable, key=lambda i: free[i])
        if now - c.waiting_since >= claim_after_sec:
            claims[target] = (c.run_id, False)
            stale = True
            views.changed()
        waits[c.run_id] = _memory_wait(c, target, free[target])
    return [cores.noted(a) for a in admits], waits


class _Cores:
    """The host's cores within one decision: what the reservations and this tick's
    admissions hold."""

    def __init__(self, host: HostView, now: float, claim_after_sec: float) -> None:
        self.total = host.cpu_total
        self.held = host.cpu_reserved
        self.now, self.claim_after_sec = now, claim_after_sec
        self.over: dict[str, str] = {}
        self.claimant: str | None = None
        """A job that waited for cores past ``claim_after_sec``: jobs behind it take no
        cores until it starts (so a stream of small jobs cannot starve it)."""

    def wait(self, c: Candidate) -> Wait | None:
        """Why ``c`` waits for cores, or None (it fits, or nothing else holds cores)."""
        if self.total <= 0 or c.cpus <= 0:
            return None
        if self.claimant is not None:
            return Wait(c.run_id, WaitKind.BEHIND, _behind(self.claimant, False))
        if c.cpus <= self.total - self.held + 1e-9:
            return None
        if self.held <= 1e-9:  # alone on the machine: cores bound sharing, not starting
            self.over[c.run_id] = (f"needs {cores_text(c.cpus)}, more than the machine's "
                                   f"{cores_text(self.total)}: started alone, oversubscribed")
            return None
        if self.now - c.waiting_since >= self.claim_after_sec:
            self.claimant = c.run_id
        return Wait(c.run_id, WaitKind.CPU, f"needs {cores_text(c.cpus)}, "
                    f"{cores_text(max(0.0, self.total - self.held))} free after reservations")

    def take(self, c: Candidate) -> None:
        self.held += c.cpus

    def noted(self, admission: Admission) -> Admission:
        note = self.over.get(admission.run_id)
        return replace(admission, note=note) if note is not None else admission


def _spread(c: Candidate, views: TickViews, host_free: int, waited: bool
            ) -> Wait | tuple[GpuKey, ...]:
    """The GPUs of a run with replicas (charged to ``views``), or why it waits."""
    assert c.replicas is not None
    big = too_big(c.replicas, c.vram_mb, views.gpus)
    if big is not None:
        return Wait(c.run_id, WaitKind.TOO_BIG, big)
    spread = choose(c.run_id, c.replicas, c.vram_mb, c.exclusive, views)
    if spread.gpus:
        if c.ram_mb > host_free:
            return _ram_wait(c, host_free)
        for gpu in spread.gpus:
            views.charge(gpu, c.vram_mb, c.run_id if c.exclusive else None)
        return spread.gpus
    if c.exclusive or waited:
        for gpu in claim_targets(c.replicas, views, c.run_id, c.exclusive):
            views.claims[gpu] = (c.run_id, c.exclusive)
        views.changed()
    return Wait(c.run_id, WaitKind(spread.kind), spread.reason)


def _memory_wait(c: Candidate, gpu: GpuKey, free: int) -> Wait:
    if on_node(gpu):  # a cluster: the roomiest GPU of any node
        return Wait(c.run_id, WaitKind.NO_NODE, f"needs {gib(c.vram_mb)}; {gpu} has "
                    f"{gib(max(0, free))} free after reservations")
    return Wait(c.run_id, WaitKind.GPU_MEMORY, f"needs {gib(c.vram_mb)} on GPU{gpu}, "
                f"{gib(max(0, free))} free after reservations")


def _ram_wait(c: Candidate, host_free: int) -> Wait:
    return Wait(c.run_id, WaitKind.HOST_RAM, f"needs {gib(c.ram_mb)} host RAM, "
                f"{gib(max(0, host_free))} available after reservations")


def _behind(claimant: str, exclusive: bool) -> str:
    what = "exclusive job" if exclusive else "job"
    return f"behind {what} {claimant} (no starvation)"


def _exclusive_wait(c: Candidate, gpu: GpuKey, runs: int, free: int, host_free: int) -> Wait:
    if runs:
        plural = "s" if runs != 1 else ""
        reason = f"waiting for exclusive use of {gpu_label(gpu)} ({runs} run{plural} on it)"
    elif free < c.vram_mb:
        reason = (f"waiting for exclusive use of {gpu_label(gpu)}: needs {gib(c.vram_mb)}, "
                  f"{gib(max(0, free))} free after reservations")
    else:
        return _ram_wait(c, host_free)
    return Wait(c.run_id, WaitKind.EXCLUSIVE, reason)


def _blocked(c: Candidate, gpus: Sequence[GpuView], claims: dict[GpuKey, tuple[str, bool]],
             holder: dict[GpuKey, str | None]) -> Wait:
    """Every GPU is claimed by a waiting job or held exclusively by a running one."""
    for g in gpus:
        if g.index in claims:
            run_id, exclusive = claims[g.index]
            return Wait(c.run_id, WaitKind.BEHIND, _behind(run_id, exclusive))
    held = ", ".join(f"{gpu_label(g.index)} by {holder[g.index]}" for g in gpus)
    return Wait(c.run_id, WaitKind.EXCLUSIVE, f"GPUs in exclusive use ({held})")


def format_clock(epoch: float) -> str:
    """``10:42:03`` local time, for reasons such as a lock's expiry."""
    return datetime.fromtimestamp(epoch).strftime("%H:%M:%S")
