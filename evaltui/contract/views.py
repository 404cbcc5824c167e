"""What a backend's status reads return: runs, the queue, resources, nodesets, admits.

One set of types: the scheduler builds them, the HTTP API serves them as its response
models (so /openapi.json documents them), the API client parses responses back into
them, and the TUI and the CLI show them. A run's records are the run-dir models of
:mod:`evaltui.contract.records`. Depends only on pydantic and the contract (imports point down).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evaltui.contract.recordparse import parse
from evaltui.contract.records import (
    SCHEDULER_FILENAME,
    SUMMARY_FILENAME,
    SchedulerRecord,
    SummaryHeader,
)
from evaltui.contract.states import AdmitState, RunState


class _View(BaseModel):
    # Built by the backend; a client ignores fields a newer backend adds. Built on use.
    model_config = ConfigDict(frozen=True, defer_build=True)


class SpecBrief(_View):
    """What a run was asked to do, from its spec.json (shown before summary.json exists)."""

    graph_name: str | None = None
    dataset: str | None = None
    split: str | None = None
    episodes_total: int | None = None
    """Selected episodes when the spec names them (indices or a count), else None."""
    worker_count: int | None = None
    priority: int = 0
    exclusive_gpu: bool = False
    marginal_vram_mb: int = 0
    set_id: str | None = None
    set_member: str | None = None
    """The set member submission this run is (``scheduling.set_member``), if any."""

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> SpecBrief:
        """The brief of a spec.json's content (a dict: this runs for every listed run)."""
        ev, sched = _section(spec, "eval"), _section(spec, "scheduling")
        indices, count = ev.get("episode_indices"), ev.get("episode_count")
        total = len(indices) if isinstance(indices, list) else \
            count if isinstance(count, int) else None
        return cls(graph_name=_text(ev.get("graph_name") or _section(spec, "graph").get("name")),
                   dataset=_text(ev.get("dataset")), split=_text(ev.get("split")),
                   episodes_total=total, worker_count=_int(ev.get("worker_count")),
                   priority=_int(sched.get("priority")) or 0,
                   exclusive_gpu=bool(sched.get("exclusive_gpu")),
                   marginal_vram_mb=_int(sched.get("marginal_vram_mb")) or 0,
                   set_id=_text(sched.get("set_id")), set_member=_text(sched.get("set_member")))


class Run(_View):
    """One run: its state, its scheduler record, its summary without rows, its spec."""

    run_id: str
    state: RunState
    """Derived from the run dir's files and a liveness check (DESIGN §3)."""
    run_dir: Path
    waiting_reason: str | None = None
    """Why a queued run waits (live while its scheduler tracks it)."""
    error: str | None = None
    """Why a file of the run could not be used (a corrupt summary.json), or why an
    aborted run ended ("killed by signal 9")."""
    scheduler: SchedulerRecord | None = None
    """scheduler.json."""
    summary: SummaryHeader | None = None
    """summary.json without ``episodes`` (rebuilt from the rows when it is unreadable)."""
    spec: SpecBrief | None = None
    """From spec.json; None when it is unreadable."""

    @property
    def node(self) -> str | None:
        """The Ray node it runs or ran on (scheduler.json's ``node``, ``--ray``); None on
        one machine and while queued (a resumed run's record still names its last node)."""
        record = self.scheduler
        return record.node if record is not None and self.state is not RunState.QUEUED \
            else None


class QueueEntry(_View):
    """One entry of the queue in admission order, with why it waits: an eval run
    (``kind`` ``run``) or a command ``evaltui run`` wraps (``kind`` ``admit``, ``run_id``
    ``admit:{admit_id}``). Both share one priority order."""

    run_id: str
    position: int
    """0 = next in line."""
    priority: int
    queued_at: str | None
    waiting_reason: str
    waiting_kind: str
    """``new``, ``lock``, ``exclusive``, ``vram``, ``ram``, ... (scheduler.WaitKind)."""
    estimate_mb: int
    ram_estimate_mb: int
    estimate_source: str
    exclusive: bool
    graph_name: str | None
    kind: Literal["run", "admit"] = "run"
    label: str | None = None
    """An admit entry's profile name (``evaltui run PROFILE``)."""
    command: str | None = None
    """An admit entry's command line."""
    admit_kind: Literal["run", "serve"] | None = None
    """An admit entry's kind (:attr:`Admit.kind`): ``serve`` for ``evaltui serve-policy``."""


class GpuProcess(_View):
    """One process's memory on a GPU."""

    pid: int
    used_mb: int


class Gpu(_View):
    """One GPU: measured memory, reservations not yet visible in it, who runs on it."""

    index: int
    name: str
    total_mb: int
    used_mb: int
    free_mb: int
    reserved_mb: int
    """Outstanding reservations (not yet visible in ``used_mb``)."""
    available_mb: int
    """``free_mb - reserved_mb``: what admission can still hand out (may be negative)."""
    utilization_pct: float | None
    runs: int
    exclusive_run: str | None
    processes: list[GpuProcess] | None
    """None when the driver cannot attribute memory to processes."""
    node: str | None = None
    """The Ray node it is on (its display name, as scheduler.json's ``node``); None on
    one machine. ``index`` is then the GPU's index on that node."""


class Host(_View):
    """Host RAM (MiB) and CPU."""

    ram_total_mb: int
    ram_available_mb: int
    ram_reserved_mb: int
    cpu_percent: float
    cpu_count: int
    load_avg_1m: float | None


class NodeHost(_View):
    """One Ray node's host RAM (MiB) and CPU, as its probe last read them."""

    name: str
    ram_total_mb: int
    ram_available_mb: int
    cpu_percent: float
    cpu_count: int


class NodeLost(_View):
    """A Ray node that was read and then left the cluster (until one of its name is back)."""

    name: str
    since: float
    """``time.time()`` when it was seen gone, on the backend's clock (as ``taken_at``)."""


def holder_key(pid: int, create_time: float, run_id: str) -> str:
    """The ledger key of a reservation: its holder process and what it holds."""
    return f"{pid}:{create_time:.3f}:{run_id}"


class LedgerEntry(_View):
    """A reservation of the machine-wide ledger: memory held back for one admitted run,
    hosted nodeset or admit entry until its holder exits. The ledger stores these (the
    scheduler's ``ledger.json``) and the status reads return them, one type for both."""

    run_id: str
    """A run id, ``nodeset:{name}`` or ``admit:{admit_id}``."""
    holder_pid: int
    holder_create_time: float
    """The holding process (a run's session leader); the reservation dies with it."""
    scheduler_pid: int
    outputs: str
    """Outputs root of the scheduler that admitted it (which run dir it belongs to)."""
    gpu: int | None
    vram_mb: int
    ram_mb: int
    exclusive: bool = False
    admitted_at: float = 0.0
    pending: bool = False
    """Held by the admitting scheduler while the run's shared nodesets load (no run yet)."""
    uid: int | None = None
    """The Unix user whose process made it (None: not recorded)."""
    other_user: bool = False
    """Made by another Unix user's scheduler (the machine-wide ledger): counted, never
    released from here."""
    cpus: float = 0.0
    """CPU cores reserved (a run's workers x cores per worker; 0: none counted, as in
    entries of earlier versions)."""
    part: int = 0
    """Which GPU of a run with replicas it holds (0: the first, or a run's only one); a
    run on several GPUs holds one entry per GPU, all with the same holder."""

    @property
    def key(self) -> str:
        """``{pid}:{create_time}:{run_id}`` of the holder (``#{part}`` after it for the
        further GPUs of a run with replicas)."""
        base = holder_key(self.holder_pid, self.holder_create_time, self.run_id)
        return f"{base}#{self.part}" if self.part else base

    @property
    def mine(self) -> bool:
        """Made by this process's user (or of unknown user): it may release it."""
        return self.uid is None or self.uid == os.getuid()


class Lock(_View):
    """The interactive lock (times are ``time.time()`` values)."""

    owner: str
    acquired_at: float
    expires_at: float
    pid: int
    reason: str
    """The waiting_reason queued jobs show while it is held."""


class Resources(_View):
    """Everything the meters show, and what admission decides on."""

    gpu_available: bool
    gpu_reason: str | None
    """Why GPUs are not measured ("NVML unavailable: ..."); admission then uses host RAM."""
    fake_gpus: bool
    gpus: list[Gpu]
    host: Host
    ledger: list[LedgerEntry]
    lock: Lock | None
    taken_at: float
    """``time.time()`` of the reading, on the backend's clock."""
    nodes: list[NodeHost] = Field(default_factory=list)
    """On a Ray cluster (``--ray``): each node's host RAM and CPU, by name; empty on one
    machine (``host`` is then the only host). ``host`` stays the scheduler's machine."""
    nodes_lost: list[NodeLost] = Field(default_factory=list)
    """On a Ray cluster: nodes that left it, by name; empty on one machine."""
    ledger_error: str | None = None
    """Why reservations cannot be made durable now (the ledger's disk is full or
    read-only): while set, nothing is admitted (queued jobs wait with kind ``ledger``)."""
    ledger_note: str | None = None
    """Why the reservation ledger is this user's own, not the machine-wide one: other
    users' schedulers on this machine cannot see these reservations (None: machine-wide,
    or per-user on purpose)."""


class Nodeset(_View):
    """A shared nodeset hosted by the scheduler, with its refcount."""

    name: str
    key: str
    impl: str
    params: dict[str, Any]
    url: str
    pid: int
    origin: str
    """``scheduler`` (auto-unloaded when unused) or ``interactive`` (stays loaded)."""
    refcount: int
    holders: list[str]
    gpu: int | None
    loaded_at: float


class Admit(_View):
    """An admit entry: waiting (and why), admitted (where), or released (why)."""

    admit_id: str
    label: str
    """What asked: the profile name of ``evaltui run``."""
    command: str
    state: AdmitState
    priority: int
    exclusive: bool
    vram_mb: int | None
    """Requested VRAM (MiB); None asks for a whole GPU."""
    reserved_mb: int | None
    """What the reservation holds once admitted."""
    gpu: int | None
    holder_pid: int
    holder_create_time: float
    waiting_reason: str | None
    queued_at: float
    admitted_at: float | None
    released_at: float | None
    release_reason: str | None
    env: dict[str, str]
    """Variables to export to the command (its GPU), once admitted."""
    version: int
    """Change counter, for ``GET /admits/{id}?wait=S&seen=VERSION``."""
    kind: Literal["run", "serve"] = "run"
    """``run``: a command ``evaltui run`` wraps; ``serve``: an ``evaltui serve-policy``,
    which holds its own entry while it serves."""
    url: str | None = None
    """A serving entry's address (``ws://HOST:PORT``), once it listens."""
    requests_served: int | None = None
    """A serving entry's requests answered so far (it reports every few seconds)."""
    ram_mb: int = 0
    """Host RAM (MiB) it reserves once admitted (0: none)."""


def run_view(run_id: str, run_dir: Path, state: RunState, record: Any, summary: Any,
             spec: SpecBrief | None = None, *, waiting_reason: str | None = None,
             error: str | None = None) -> Run:
    """A run's view from its records as read from disk (parsed JSON, or None).

    summary.json's rows are left out (they are read per episode). A record that does not
    fit its schema is left out too, and ``error`` (unless already set) says why.
    """
    if isinstance(summary, dict) and "episodes" in summary:
        summary = {k: v for k, v in summary.items() if k != "episodes"}
    scheduler, bad_record = parse(SchedulerRecord, record, SCHEDULER_FILENAME)
    header, bad_summary = parse(SummaryHeader, summary, SUMMARY_FILENAME)
    return Run(run_id=run_id, state=state, run_dir=run_dir, waiting_reason=waiting_reason,
               error=error or bad_record or bad_summary, scheduler=scheduler, summary=header,
               spec=spec)


def _section(spec: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = spec.get(name)
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def data_label(dataset: object, split: object) -> str:
    """What a run ran on, for a title: ``babyai/GoToLocal``; an own JSONL dataset by its
    file name alone (its split is the file's stem: ``<dir>/cliff.jsonl/cliff`` read as a
    path), with the split only where it is not that stem."""
    text = str(dataset) if dataset not in (None, "") else "?"
    if "/" in text or text.endswith(".jsonl"):
        name = text.rstrip("/").rsplit("/", 1)[-1]
        stem = name.removesuffix(".jsonl")
        return name if split in (None, "", stem) else f"{name} ({split})"
    return f"{text}/{split}" if split not in (None, "") else text
