"""Request and response bodies of the HTTP API: the typed contract behind /openapi.json.

The response models of runs, episodes, the queue, resources, nodesets and admits ARE the
status views (:mod:`evaltui.contract.views`) and run-dir records
(:mod:`evaltui.contract.records`) the scheduler builds and the engine writes: one
schema, re-exported here for the routes and :class:`~evaltui.api.client.ApiClient`, so a
script, the CLI and the attached TUI all see the same fields. This module adds what only
the API has: request bodies, errors, health, log pages. Field names and string values
are the ones on disk (DESIGN §2, §3).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evaltui.contract.records import EpisodeRow
from evaltui.contract.states import RunState
from evaltui.contract.views import (
    Admit,
    Gpu,
    GpuProcess,
    Host,
    LedgerEntry,
    Lock,
    Nodeset,
    QueueEntry,
    Resources,
    Run,
    SpecBrief,
)

__all__ = ["API_PREFIX", "Admit", "AdmitBind", "AdmitRequest", "AdmitServing", "BackendInfo",
           "EpisodeRow", "ErrorBody", "Gpu", "GpuProcess", "Health", "Host", "LedgerEntry", "Lock",
           "LockRequest", "LogPage", "LogRecord", "Nodeset", "NodesetLoad", "PriorityRequest",
           "QueueEntry", "Resources", "Run", "RunRef", "SubmitRef", "SpecBrief", "Unlocked"]

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


class RunRef(BaseModel):
    """A run id and its state right after a request (submit, cancel, resume)."""

    run_id: str
    state: RunState


class SubmitRef(RunRef):
    """``POST /runs``: the new run, and what the user should know about its spec."""

    warnings: list[str] = Field(default_factory=list)
    """A step budget below the env's own limit, episodes without reference data, ..."""
    notes: list[str] = Field(default_factory=list)
    """What the nodesets' own checks found (e.g. the renderer a benchmark probed)."""


class PriorityRequest(BaseModel):
    """``POST /runs/{run_id}/priority``: move a queued run in the queue."""

    model_config = ConfigDict(extra="forbid")

    priority: int = Field(ge=-100, le=100)
    """Higher is admitted first."""


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
    cpus: float | None = Field(default=None, gt=0, le=4096)
    """CPU cores to reserve (admitted like memory); null: none."""
    holder_pid: int = Field(gt=0, le=1 << 31)
    """The process the reservation lives with (the wrapper); it must run on this machine."""
    holder_create_time: float = Field(ge=0)
    command: str = Field(default="", max_length=4000)
    kind: Literal["run", "serve"] = "run"
    """``serve``: an ``evaltui serve-policy`` holding its own entry while it serves."""
    ram_mb: int | None = Field(default=None, ge=0, le=1 << 30)
    """Host RAM to reserve (MiB); null: none."""


class AdmitServing(BaseModel):
    """``POST /admits/{id}/serving``: a serving entry's report (where, how much)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=400)
    requests_served: int = Field(ge=0)


class AdmitBind(BaseModel):
    """``POST /admits/{id}/bind``: hand the reservation over to the command's process."""

    model_config = ConfigDict(extra="forbid")

    pid: int = Field(gt=0, le=1 << 31)
    create_time: float = Field(ge=0)
