"""Request and response bodies of the HTTP API: the typed contract behind /openapi.json.

The server builds these from the scheduler's views; :class:`~evaltui.api.client.ApiClient`
parses responses back into them, so a script, the CLI and the attached TUI all see the
same fields. Field names and string values are the ones on disk (DESIGN §2, §3).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evaltui.states import AdmitState, RunState

API_PREFIX = "/api/eval/v2"


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer: what went wrong, and the request field at fault if any."""

    detail: str
    field: str | None = None
    """Dotted path of the field at fault (``eval.episode_count``), when one is."""


class Health(BaseModel):
    """``GET /healthz`` (no token needed)."""

    status: Literal["ok"] = "ok"
    service: Literal["evaltui"] = "evaltui"
    version: str
    api: str = API_PREFIX


class BackendInfo(BaseModel):
    """Which backend this is: the process and the outputs root it schedules into."""

    version: str
    pid: int
    outputs: str
    runs_root: str
    state_dir: str
    started_at: float
    fake_gpus: bool
    admits: bool
    """True if this backend queues admit entries (``evaltui run``)."""


class SpecBrief(BaseModel):
    """What a run was asked to do, from its spec.json (shown before summary.json exists)."""

    graph_name: str | None = None
    dataset: str | None = None
    split: str | None = None
    episodes_total: int | None = None
    worker_count: int | None = None
    priority: int = 0
    exclusive_gpu: bool = False
    marginal_vram_mb: int = 0


class Run(BaseModel):
    """One run: its state, its scheduler record and its summary without episode rows."""

    run_id: str
    state: RunState
    run_dir: str
    waiting_reason: str | None = None
    error: str | None = None
    """Why a file of the run could not be used (e.g. a corrupt summary.json)."""
    scheduler: dict[str, Any] | None = None
    """scheduler.json: state, priority, queued_at, admitted_at, pid, reservation, ..."""
    summary: dict[str, Any] | None = None
    """summary.json without ``episodes``."""
    spec: SpecBrief | None = None


class RunRef(BaseModel):
    """A run id and its state right after a request (submit, cancel, resume)."""

    run_id: str
    state: RunState


class PriorityRequest(BaseModel):
    """``POST /runs/{run_id}/priority``: move a queued run in the queue."""

    model_config = ConfigDict(extra="forbid")

    priority: int = Field(ge=-100, le=100)
    """Higher is admitted first."""


class EpisodeRow(BaseModel):
    """An episode's row (episode.json); unknown extra fields are kept."""

    model_config = ConfigDict(extra="allow")

    episode_index: int
    episode_id: str | None = None
    scene_id: str | None = None
    instruction: str | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)
    step_count: int | None = None
    elapsed_sec: float | None = None
    status: str | None = None
    error: str | None = None
    worker_id: int | None = None
    attempts: int | None = None


class LogRecord(BaseModel):
    """One log.jsonl line and the byte offset it starts at."""

    offset: int
    record: dict[str, Any]


class LogPage(BaseModel):
    """Complete lines of an episode's log.jsonl from ``offset``."""

    run_id: str
    episode_index: int
    offset: int
    next_offset: int
    """Where the next page starts (pass it as ``offset``)."""
    complete: bool
    """True if the page reaches the end of what is written so far (poll again later if
    the episode is still running)."""
    records: list[LogRecord]


class QueueEntry(BaseModel):
    """A queued run in admission order, with why it waits."""

    run_id: str
    position: int
    priority: int
    queued_at: str | None
    waiting_reason: str
    waiting_kind: str
    estimate_mb: int
    ram_estimate_mb: int
    estimate_source: str
    exclusive: bool
    graph_name: str | None


class GpuProcess(BaseModel):
    """One process's memory on a GPU."""

    pid: int
    used_mb: int


class Gpu(BaseModel):
    """One GPU: measured memory, reservations not yet visible in it, who runs on it."""

    index: int
    name: str
    total_mb: int
    used_mb: int
    free_mb: int
    reserved_mb: int
    available_mb: int
    """``free_mb - reserved_mb``: what admission can still hand out."""
    utilization_pct: float | None
    runs: int
    exclusive_run: str | None
    processes: list[GpuProcess] | None


class Host(BaseModel):
    """Host RAM (MiB) and CPU."""

    ram_total_mb: int
    ram_available_mb: int
    ram_reserved_mb: int
    cpu_percent: float
    cpu_count: int
    load_avg_1m: float | None


class LedgerEntry(BaseModel):
    """A reservation of the machine-wide ledger."""

    run_id: str
    """A run id, ``nodeset:{name}`` or ``admit:{admit_id}``."""
    holder_pid: int
    holder_create_time: float
    scheduler_pid: int
    outputs: str
    gpu: int | None
    vram_mb: int
    ram_mb: int
    exclusive: bool
    admitted_at: float
    pending: bool


class Lock(BaseModel):
    """The interactive lock (times are ``time.time()`` values)."""

    owner: str
    acquired_at: float
    expires_at: float
    pid: int
    reason: str


class Resources(BaseModel):
    """Everything the meters show, and what admission decides on."""

    gpu_available: bool
    gpu_reason: str | None
    fake_gpus: bool
    gpus: list[Gpu]
    host: Host
    ledger: list[LedgerEntry]
    lock: Lock | None
    taken_at: float


class Nodeset(BaseModel):
    """A shared nodeset hosted by the scheduler, with its refcount."""

    name: str
    key: str
    impl: str
    params: dict[str, Any]
    url: str
    pid: int
    origin: str
    refcount: int
    holders: list[str]
    gpu: int | None
    loaded_at: float


class NodesetLoad(BaseModel):
    """``POST /nodesets/{name}/load``."""

    model_config = ConfigDict(extra="forbid")

    impl: str = Field(min_length=3, max_length=500)
    """``package.module:Class``."""
    params: dict[str, Any] = Field(default_factory=dict)
    gpu: int | None = Field(default=None, ge=0, le=1023)


class LockRequest(BaseModel):
    """``POST /lock``: take (or extend, for the same owner) the interactive lock."""

    model_config = ConfigDict(extra="forbid")

    owner: str = Field(min_length=1, max_length=200)
    ttl_sec: float = Field(default=300.0, gt=0, le=24 * 3600)


class Unlocked(BaseModel):
    released: bool


class AdmitRequest(BaseModel):
    """``POST /admits``: queue a command (not an eval run) for admission."""

    model_config = ConfigDict(extra="forbid")

    profile: str = Field(min_length=1, max_length=200)
    marginal_vram_mb: int | None = Field(default=None, ge=0, le=1 << 24)
    """VRAM to reserve (MiB); null with ``exclusive_gpu`` asks for a whole GPU."""
    exclusive_gpu: bool = False
    priority: int = Field(default=0, ge=-100, le=100)
    holder_pid: int = Field(gt=0, le=1 << 31)
    """The process the reservation lives with (the wrapper); it must run on this machine."""
    holder_create_time: float = Field(ge=0)
    command: str = Field(default="", max_length=4000)


class AdmitBind(BaseModel):
    """``POST /admits/{id}/bind``: hand the reservation over to the command's process."""

    model_config = ConfigDict(extra="forbid")

    pid: int = Field(gt=0, le=1 << 31)
    create_time: float = Field(ge=0)


class Admit(BaseModel):
    """An admit entry: waiting (and why), admitted (where), or released (why)."""

    admit_id: str
    label: str
    command: str
    state: AdmitState
    priority: int
    exclusive: bool
    vram_mb: int | None
    reserved_mb: int | None
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
