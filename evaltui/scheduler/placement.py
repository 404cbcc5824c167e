"""Where admitted runs go: the one object admission asks about GPUs it does not own.

A scheduler has one :class:`GpuPlacement`. :class:`LocalPlacement` is this machine (its GPUs
through NVML or fake ones, held in the machine's ledger); the Ray cluster's is
``cluster.placement.RayPlacement`` (node GPUs held in the cluster ledger). The tick,
starting, claims, sampling and the status reads ask it -- which GPUs to consider, how to
pin a run, what to reserve where, what a lost node means -- and never the type of a probe
or of a GPU key.

A third placement (a Slurm allocation: its nodes' GPUs, pinned by ``srun`` variables,
held for the allocation's lifetime) implements the same methods. Every method takes one
GPU key per call, except ``reserve_all``/``pin_all``: a run spread over several GPUs
(replicas) holds several keys, reserved together (all or none) and pinned as a set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from evaltui.contract.records import ReservationRecord
from evaltui.contract.views import LedgerEntry, NodeHost, NodeLost
from evaltui.gpu.env import gpu_env
from evaltui.scheduler.admission.accounting import Accounting, GpuView
from evaltui.scheduler.admission.gpukey import GpuKey
from evaltui.scheduler.admission.resources import ResourceSnapshot


@dataclass(frozen=True)
class Displaced:
    """A running run whose GPU went away with its node: to be placed again."""

    run_id: str
    vram_mb: int
    exclusive: bool
    lost: str
    """Where it was (a node's name), for its record and its waiting reason."""
    since: float
    """When it was placed there (``time.time()``): the oldest are moved first."""


class GpuPlacement(Protocol):
    """What admission needs to know about where GPUs are (see the module docstring)."""

    def sync(self, live: set[str]) -> None:
        """Once per tick, before admission: renew what this scheduler holds elsewhere,
        release what its ended runs held, learn other schedulers' reservations.
        ``live``: the runs it has started or is loading."""
        ...

    def holds(self) -> bool:
        """Whether it still holds something elsewhere that later ticks must release (or a
        run to move), so the tick runs although nothing is queued or running here."""
        ...

    def account(self, acct: Accounting, entries: Sequence[LedgerEntry],
                snap: ResourceSnapshot) -> Accounting:
        """``acct`` (this machine's ledger set against ``snap``) with the GPUs as
        admission must see them: reservations held elsewhere set against their
        readings, and the usage that calibrates runs placed there."""
        ...

    def candidates(self, gpus: tuple[GpuView, ...] | None) -> tuple[GpuView, ...] | None:
        """The GPUs admission may place on now (None: no GPU reading at all)."""
        ...

    def refuses_admits(self) -> str | None:
        """Why admit entries (``evaltui run`` commands) cannot be placed, or None."""
        ...

    def without_gpus(self) -> str | None:
        """Why nothing is admitted while no GPU is reported, or None: admit on host RAM
        alone (a machine without NVML)."""
        ...

    def reserve(self, run_id: str, key: GpuKey, vram_mb: int, exclusive: bool,
                free_mb: int) -> str | None:
        """Take ``key`` for the run where other schedulers might take it too; None when
        granted, else why not. This machine's ledger is not it (the tick's transaction
        holds that)."""
        ...

    def reserve_all(self, run_id: str, keys: Sequence[GpuKey], vram_mb: int, exclusive: bool,
                    free_mb: Sequence[int]) -> str | None:
        """``reserve`` every GPU of a run with replicas (``free_mb`` each one's measured
        free) in one step, all or none; None when granted, else why not."""
        ...

    def local_gpu(self, key: GpuKey | None) -> int | None:
        """The GPU of this machine behind ``key`` (what its ledger reserves, where a
        shared nodeset is hosted for the run), or None: the GPU is elsewhere."""
        ...

    def record(self, key: GpuKey | None) -> dict[str, Any]:
        """scheduler.json fields naming where the run went (``gpu``, and ``node``)."""
        ...

    def reservation(self, key: GpuKey | None, vram_mb: int, ram_mb: int) -> ReservationRecord:
        """scheduler.json's ``reservation`` of a run placed on ``key``: what a restarted
        scheduler holds again for it (``adopt``)."""
        ...

    def pin(self, key: GpuKey | None, run_id: str) -> dict[str, str]:
        """Environment variables that put the run (its process, its actors) on ``key``."""
        ...

    def pin_all(self, keys: Sequence[GpuKey], run_id: str) -> dict[str, str]:
        """Environment variables that put a run with replicas on ``keys`` (the first is
        where the run's other actors go): one replica on each."""
        ...

    def adopt(self, run_id: str, held: ReservationRecord, exclusive: bool) -> int | None:
        """Hold again what an adopted run (its scheduler died) reserved; returns the GPU
        of this machine its ledger entry holds (None: the GPU is elsewhere)."""
        ...

    def displaced(self) -> list[Displaced]:
        """Runs of this scheduler whose GPU went away (a node left), oldest first."""
        ...

    def unplace(self, run_id: str) -> bool:
        """Release a displaced run's old GPU; False if it was released already."""
        ...

    def nodes(self) -> list[NodeHost]:
        """Other machines' host RAM and CPU, for the meters (none on one machine)."""
        ...

    def nodes_lost(self) -> list[NodeLost]:
        """Machines that left, with when."""
        ...


class LocalPlacement:
    """This machine: GPUs by NVML index (or fake ones), all held in its own ledger."""

    def __init__(self, *, fake: bool, allowed: frozenset[int] | set[int] | None) -> None:
        self.fake = fake
        self.allowed = allowed
        """The GPUs ``CUDA_VISIBLE_DEVICES`` leaves this scheduler (None: all)."""

    def sync(self, live: set[str]) -> None:
        """Nothing is held elsewhere."""

    def holds(self) -> bool:
        return False

    def account(self, acct: Accounting, entries: Sequence[LedgerEntry],
                snap: ResourceSnapshot) -> Accounting:
        return acct

    def candidates(self, gpus: tuple[GpuView, ...] | None) -> tuple[GpuView, ...] | None:
        if gpus is None or self.allowed is None:
            return gpus
        return tuple(g for g in gpus if g.index in self.allowed)

    def refuses_admits(self) -> str | None:
        return None

    def without_gpus(self) -> str | None:
        return None

    def reserve(self, run_id: str, key: GpuKey, vram_mb: int, exclusive: bool,
                free_mb: int) -> str | None:
        return None

    def reserve_all(self, run_id: str, keys: Sequence[GpuKey], vram_mb: int, exclusive: bool,
                    free_mb: Sequence[int]) -> str | None:
        return None  # the tick's transaction of this machine's ledger holds them all

    def local_gpu(self, key: GpuKey | None) -> int | None:
        assert key is None or isinstance(key, int)  # this machine keys GPUs by index
        return key

    def record(self, key: GpuKey | None) -> dict[str, Any]:
        return {"gpu": self.local_gpu(key)}

    def reservation(self, key: GpuKey | None, vram_mb: int, ram_mb: int) -> ReservationRecord:
        return ReservationRecord(gpu=self.local_gpu(key), mb=vram_mb, ram_mb=ram_mb)

    def pin(self, key: GpuKey | None, run_id: str) -> dict[str, str]:
        return gpu_env(self.local_gpu(key), self.fake)

    def pin_all(self, keys: Sequence[GpuKey], run_id: str) -> dict[str, str]:
        local = [self.local_gpu(k) for k in keys]
        return gpu_env([g for g in local if g is not None], self.fake)  # 0,2,3

    def adopt(self, run_id: str, held: ReservationRecord, exclusive: bool) -> int | None:
        # A run a cluster scheduler placed on a node: its GPU is not on this machine.
        return None if held.node_id else held.gpu

    def displaced(self) -> list[Displaced]:
        return []

    def unplace(self, run_id: str) -> bool:
        return False

    def nodes(self) -> list[NodeHost]:
        return []

    def nodes_lost(self) -> list[NodeLost]:
        return []
