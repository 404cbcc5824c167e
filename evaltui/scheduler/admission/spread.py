"""Admission of a run with replicas: one replica per GPU, on several GPUs at once.

A run whose graph has a replicated shared nodeset (DESIGN §12 "Replicas") asks for up
to ``most`` GPUs (None: ``per_gpu``, every GPU that fits) and at least ``least``. Each
GPU must fit one replica on its own (the run's per-replica estimate <= free minus
reservations), under the same rules as a one-GPU job, per GPU:

* a GPU held exclusively by a running run, or claimed by a waiting job ahead of this
  one (no starvation), is not taken;
* an exclusive run with replicas takes only GPUs nothing else runs on;
* of the GPUs that fit, the tightest are taken first (best fit per GPU), keeping whole
  GPUs free for big and exclusive jobs.

A run that cannot get ``least`` GPUs now waits, saying per GPU why not ("needs 14.0 GiB
on >= 2 GPUs; GPU0 9.1 free, GPU1 20.0 free, GPU2 exclusive"); once it has waited
``claim_after_sec`` (or at once, exclusive) it claims the ``least`` GPUs closest to
fitting, so a stream of one-GPU jobs behind it cannot starve it. One that asks for more
GPUs than the machine has that could ever fit a replica waits as ``too_big``.

Pure: the caller (decision.decide) owns the per-tick views and charges what is chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from evaltui.contract.units import gib
from evaltui.engine.graph.replicas import ReplicaAsk
from evaltui.scheduler.admission.accounting import GpuView
from evaltui.scheduler.admission.gpukey import GpuKey, gpu_label


@dataclass
class TickViews:
    """What admission knows of each GPU within one tick (charged as jobs are admitted)."""

    gpus: Sequence[GpuView]
    free: dict[GpuKey, int]
    runs: dict[GpuKey, int]
    holder: dict[GpuKey, str | None]
    claims: dict[GpuKey, tuple[str, bool]]
    """gpu -> (run_id, exclusive) of the waiting job that claimed it."""
    _seen: dict[tuple[object, ...], Spread] = field(default_factory=dict)

    def changed(self) -> None:
        self._seen.clear()

    def charge(self, gpu: GpuKey, vram_mb: int, exclusive_run: str | None) -> None:
        """An admission on ``gpu`` (``exclusive_run``: the run that then holds it alone)."""
        self.free[gpu] -= vram_mb
        self.runs[gpu] += 1
        if exclusive_run is not None:
            self.holder[gpu] = exclusive_run
        self.changed()


@dataclass(frozen=True)
class Spread:
    """The outcome for one run: the GPUs to start it on, or why it waits."""

    gpus: tuple[GpuKey, ...] = ()
    kind: str = ""
    """A WaitKind value when it waits ("" when admitted)."""
    reason: str = ""


def too_big(ask: ReplicaAsk, vram_mb: int, gpus: Sequence[GpuView]) -> str | None:
    """Why the run can never start as asked (more GPUs than could ever fit a replica)."""
    roomy = [g for g in gpus if g.total_mb >= vram_mb]
    if len(roomy) >= ask.least:
        return None
    plural = "s" if ask.least != 1 else ""
    return (f"needs {gib(vram_mb)} on >= {ask.least} GPU{plural}; the machine has "
            f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}, {len(roomy)} of them with "
            f"{gib(vram_mb)} or more (lower min_replicas or the per-replica need)")


def choose(run_id: str, ask: ReplicaAsk, vram_mb: int, exclusive: bool, views: TickViews
           ) -> Spread:
    """The GPUs for a run with replicas now, or why it waits (see the module docstring).

    The same ask against unchanged views has the same answer: a long queue of waiting
    runs with replicas is decided (and its reasons written) once per kind of ask. (A run
    never sees its own claim here: it claims only after it was decided, once a tick.)"""
    key = (ask, vram_mb, exclusive)
    known = views._seen.get(key)
    if known is None:
        known = views._seen[key] = _choose(run_id, ask, vram_mb, exclusive, views)
    return known


def _choose(run_id: str, ask: ReplicaAsk, vram_mb: int, exclusive: bool, views: TickViews
            ) -> Spread:
    fits: list[GpuKey] = []
    why: dict[GpuKey, str] = {}
    for g in views.gpus:
        i = g.index
        if i in views.claims and views.claims[i][0] != run_id:
            why[i] = f"claimed by {views.claims[i][0]}"
        elif views.holder[i] is not None:
            why[i] = "exclusive"
        elif exclusive and views.runs[i] > 0:
            why[i] = f"{views.runs[i]} run{'s' if views.runs[i] != 1 else ''} on it"
        elif views.free[i] < vram_mb:
            why[i] = f"{gib(max(0, views.free[i]), unit=False)} free"
        else:
            fits.append(i)
    if len(fits) >= ask.least:
        fits.sort(key=lambda i: (views.free[i], str(i)))  # best fit: tightest first
        take = fits if ask.most is None else fits[:ask.most]
        return Spread(gpus=tuple(take))
    listed = "; ".join([f"needs {gib(vram_mb)} on >= {ask.least} GPU"
                        f"{'s' if ask.least != 1 else ''}",
                        ", ".join(f"{gpu_label(g.index)} "
                                  f"{why.get(g.index) or _fit_text(views.free[g.index])}"
                                  for g in views.gpus)])
    return Spread(kind=_kind(why, exclusive), reason=listed)


def claim_targets(ask: ReplicaAsk, views: TickViews, run_id: str, exclusive: bool
                  ) -> list[GpuKey]:
    """The GPUs a waiting run with replicas claims (no starvation): the ``least`` open
    ones closest to fitting it (for an exclusive run, closest to idle)."""
    open_gpus = [g.index for g in views.gpus
                 if g.index not in views.claims or views.claims[g.index][0] == run_id]
    if not exclusive:
        open_gpus = [i for i in open_gpus if views.holder[i] is None]
    if exclusive:
        open_gpus.sort(key=lambda i: (views.runs[i], -views.free[i], str(i)))
    else:
        open_gpus.sort(key=lambda i: (-views.free[i], str(i)))
    return open_gpus[:ask.least]


def _fit_text(free: int) -> str:
    return f"{gib(max(0, free), unit=False)} free (fits)"


def _kind(why: dict[GpuKey, str], exclusive: bool) -> str:
    """The wait's kind: memory unless nothing fell short of memory alone."""
    texts = list(why.values())
    if any(t.endswith(" free") for t in texts):
        return "gpu_memory"
    if any(t.startswith("claimed by") for t in texts):
        return "behind"
    return "exclusive"
