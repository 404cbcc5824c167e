"""The run-dir records (DESIGN §2): file names and one pydantic model per JSON file.

The engine builds these models and dumps them (episode.json, trajectory.json,
summary.json); the scheduler, the API and the TUI read the files back through the same
models (inspect_ai's ``EvalSample`` idea: one schema, written and read everywhere).
Depends only on pydantic and :mod:`evaltui.contract.states` (imports point down).

Reading is tolerant: every model keeps fields it does not know (``extra="allow"``), so a
file written by a newer version loses nothing when an older backend serves it, and
fields added over time default to None ("not recorded by the version that wrote it").
"""

from __future__ import annotations

from typing import Literal, TypeVar

from pydantic import BaseModel, Field

from evaltui.contract.recordbase import RecordModel
from evaltui.contract.states import EpisodeStatus, RunState, SummaryStatus
from evaltui.contract.summarynotes import DiskWaitNote, FirstError, ReplicaNote, StoppedNote

# ---- file and directory names of a run dir ---------------------------------------------

RUNS_DIRNAME = "eval_runs"
"""Under the outputs root: one directory per run, named by its run_id."""
SPEC_FILENAME = "spec.json"
"""The whole JobSpec as submitted (backend, before spawn)."""
SHARED_URLS_FILENAME = "shared_urls.json"
"""``{nodeset_name: url}`` of shared nodesets hosted outside the run."""
SCHEDULER_FILENAME = "scheduler.json"
REQUEUE_REFUSED_FILENAME = "_REQUEUE_REFUSED"
"""A Slurm run asked to requeue its job and was refused (Slurm's words)."""
"""The backend's lifecycle record (:class:`SchedulerRecord`)."""
GRAPH_FILENAME = "graph.json"
"""The run-level graph snapshot, resolved with defaults (run subprocess)."""
SUMMARY_FILENAME = "summary.json"
"""The run's running snapshot and terminal status (:class:`Summary`)."""
ROWS_FILENAME = "rows.jsonl"
"""While a run runs: its episode rows, one JSON object a line, appended as episodes end
(a row of the same index later in the file replaces the earlier one). The running
summary.json holds aggregates only (``rows_file`` names this file); the final one holds
every row and this file is removed."""
DONE_FILENAME = "_DONE"
"""Touched last by the run subprocess on a clean exit (absent: aborted)."""
RUN_LOG_FILENAME = "run.log"
"""The run subprocess's stdout and stderr."""
EPISODES_DIRNAME = "episodes"
"""Holds one ``ep{NNNN}`` directory per episode."""
EPISODE_FILENAME = "episode.json"
"""An episode's row (:class:`EpisodeRow`), written when it finishes."""
TRAJECTORY_FILENAME = "trajectory.json"
"""What an episode's metrics are computed from (:class:`TrajectoryRecord`)."""
LOG_FILENAME = "log.jsonl"
"""An episode's per-node firing log, one JSON object a line."""
ASSETS_DIRNAME = "assets"
"""An episode's image artefacts, referenced from its log."""

Point = list[int | float]
"""A position ``[x, y, ...]``; integral coordinates stay integers, as the env gave them."""

M = TypeVar("M", bound=BaseModel)


# ---- scheduler.json -----------------------------------------------------------------------


class ReservationRecord(RecordModel):
    """What the scheduler reserved for a run when it admitted it (MiB)."""

    gpu: int | None = None
    """The GPU the run was put on; None for a run that needs none."""
    node: str | None = None
    """The Ray node of that GPU (``--ray``); None on one machine."""
    node_id: str | None = None
    """That node's Ray id: a restarted scheduler holds the reservation again by it."""
    mb: int = 0
    """VRAM held on that GPU."""
    ram_mb: int = 0
    """Host RAM held."""
    gpus: list[int] = Field(default_factory=list)
    """A run with replicas: every GPU of this machine it holds, ``gpu`` first (empty for
    a one-GPU run); a restarted scheduler holds each again."""
    each_mb: int = 0
    """VRAM held on each GPU of ``gpus`` after the first (one replica's)."""


class SchedulerRecord(RecordModel):
    """scheduler.json: the backend's lifecycle record of one run.

    Written by whoever schedules the run (a backend, or ``evaltui eval``) as a merge of
    changed fields under the run dir's lock; it lets a restarted backend restore its
    queue and adopt live runs. Timestamps are ISO 8601 local times with milliseconds.
    """

    state: RunState
    """The state its scheduler last recorded (a status read derives the real one)."""
    priority: int = 0
    """Higher is admitted first (-100..100)."""
    queued_at: str | None = None
    """When it was queued (again, after a resume)."""
    admitted_at: str | None = None
    """When admission started it; None while queued."""
    pid: int | None = None
    """The run subprocess, once spawned."""
    pid_create_time: float | None = None
    """The run subprocess's create time, so a reused PID is not taken for the run."""
    reservation: ReservationRecord | None = None
    """What admission reserved for it; None until admitted."""
    cancel_requested_at: str | None = None
    """When a cancel was asked for; a cancelled queued run is never re-queued."""
    exit_code: int | None = None
    """The run subprocess's exit code (negative: killed by that signal)."""
    estimate_mb: int | None = None
    """VRAM admission expects the run to need."""
    ram_estimate_mb: int | None = None
    """Host RAM admission expects the run to need."""
    estimate_source: str | None = None
    """Where the estimate came from: ``calibrated``, ``declared``, ``partly calibrated``."""
    gpu: int | None = None
    """The GPU it was admitted on (a run with replicas: the first of ``gpus``)."""
    gpus: list[str] = Field(default_factory=list)
    """A run with replicas: the labels (``GPU0``) of every GPU it holds a reservation on,
    in the order chosen, the order of its ``CUDA_VISIBLE_DEVICES``; empty otherwise."""
    node: str | None = None
    """The Ray node it was admitted on (its display name; ``gpu`` is an index there), when
    its scheduler admits across a cluster (``--ray``); None on one machine."""
    measured_peak_mb: int | None = None
    """Highest VRAM its processes were measured using."""
    measured_peak_ram_mb: int | None = None
    """Highest host RAM (RSS) its processes were measured using."""
    waiting_reason: str | None = None
    """Why it waits, as last written (the live text is in the queue read)."""
    waiting_kind: str | None = None
    """The kind of that reason (``scheduler.WaitKind`` values), or None."""
    scheduler_pid: int | None = None
    """The backend process that queued or started it."""
    owner: str | None = None
    """The scheduler that owns it; another may claim it once this owner is gone."""
    warnings: list[str] = Field(default_factory=list)
    """What validation warned about at submit."""
    finished_at: str | None = None
    """When its scheduler saw it end."""
    error: str | None = None
    """Why it failed or aborted, when the scheduler knows (e.g. it could not spawn)."""
    resumed_at: str | None = None
    """When it was last queued again by a resume."""
    resume_count: int = 0
    """How many times it was resumed."""
    moved_from: list[str] = Field(default_factory=list)
    """Ray nodes it was moved off, in order, after they left the cluster (``--ray``)."""
    slurm_job_id: str | None = None
    """The Slurm job it runs as (``--executor slurm`` from a login node): no scheduler of
    evaltui's runs it, and its ``pid`` is on a node of the cluster, so readers ask Slurm
    (``squeue``, a hint) beside the run dir (the truth) how it stands."""
    slurm_cluster: str | None = None
    """That job's cluster (Slurm's ``ClusterName``), where it could be asked."""
    slurm_batch_host: str | None = None
    """The node its batch step (the run process) runs on, as that step recorded it."""
    slurm_earlier_job_ids: list[str] = Field(default_factory=list)
    """Jobs it ran as before ``slurm_job_id``, oldest first: each resubmission (Slurm
    would not requeue the job) runs the same run dir as a new job."""
    note: str | None = None
    """Slurm's word on how its job stands or ended (``PENDING (Priority)``,
    ``TIMEOUT``), where the run dir itself could not say."""


# ---- episode.json -------------------------------------------------------------------------


class NodeRef(RecordModel):
    """One node of the graph, as an episode row lists it (so an ep dir replays alone)."""

    name: str
    """The node's name in the graph."""
    nodeset: str
    """The nodeset it calls."""
    op: str
    """The nodeset's node (method) it fires."""
    inputs: list[str] = Field(default_factory=list)
    """Its input ports."""
    outputs: list[str] = Field(default_factory=list)
    """Its output ports."""


class EpisodeRow(RecordModel):
    """episode.json, and each row of summary.json's ``episodes``.

    The run subprocess writes every field; rows made by hand or by older versions may
    lack any but ``episode_index`` and ``status`` (those read as None).
    """

    episode_index: int
    """0-based line of the episode in its dataset split."""
    episode_id: str | int | None = None
    """The dataset's id of the episode (a string for the built-in benchmark)."""
    scene_id: str | int | None = None
    """The dataset's scene of the episode, if it has one."""
    instruction: str | None = None
    """The instruction the agent was given, if the dataset has one."""
    task: str | None = None
    """The dataset's task of the episode (Meta-World: ``reach-v3``, ...), if it has one."""
    seed: int | None = None
    """The dataset's seed of the episode (the env's reset or build seed), if it has one."""
    metrics: dict[str, float | None] = Field(default_factory=dict)
    """success, spl, ndtw, sdtw, path_length, nav_error, ... (None: not finite)."""
    step_count: int | None = None
    """Steps taken."""
    elapsed_sec: float | None = None
    """Wall time of the episode."""
    status: EpisodeStatus | Literal["unreadable"]
    """How it ended: ok, error, timeout or cancelled. ``unreadable`` is never written: a
    reader marks so the row of an episode.json it could not use (``error`` says why)."""
    error: str | None = None
    """The traceback or message of an error or timeout."""
    worker_id: int | None = None
    """The worker slot that ran it."""
    node: str | None = None
    """The machine its worker ran on, for an executor that spreads workers over several
    (a Slurm node's name); None on the local pool."""
    attempts: int | None = None
    """Times it was started (retries and resumes included)."""
    finished_at: str | None = None
    """When it ended (ISO 8601, local time)."""
    run_id: str | None = None
    """The run it belongs to."""
    graph_name: str | None = None
    """The graph it was scored with."""
    dataset: str | None = None
    """The dataset name or path."""
    split: str | None = None
    """The dataset split."""
    worker_count: int | None = None
    """Workers of the run."""
    nodes: list[NodeRef] | None = None
    """The graph's nodes (name, nodeset, op, ports), for a standalone replay."""


# ---- trajectory.json ----------------------------------------------------------------------


class TrajectoryRecord(RecordModel):
    """trajectory.json: everything an episode's metrics are computed from."""

    episode_index: int
    """The episode's index (its ep dir's number)."""
    episode_id: str | int | None = None
    """The dataset's id of the episode."""
    status: EpisodeStatus
    """The episode's status."""
    positions: list[Point] | None = None
    """Agent positions in order, start first, appended when they change; None when the
    env reported none."""
    success: bool | None = None
    """The env's own success verdict (before errors count as failures)."""
    nav_error: float | None = None
    """Final distance to the goal."""
    extra: dict[str, float] = Field(default_factory=dict)
    """The env's extra metrics, e.g. ``{"steps": 12.0}``."""
    reference_path: list[Point] | None = None
    """The dataset's reference path, for nDTW and SDTW."""
    geodesic_distance: float | None = None
    """Start-to-goal distance from the dataset, for SPL."""
    success_distance: float
    """The env's success radius."""
    d_th: float
    """nDTW's threshold distance (the same value as ``success_distance``)."""


# ---- summary.json -------------------------------------------------------------------------


class SummaryHeader(RecordModel):
    """summary.json without its episode rows: what run lists and status reads carry.

    Fields from ``metrics_n`` on were added with the results contract; summaries written
    before it read them as None.
    """

    run_id: str | None = None
    """The run dir's name."""
    graph_name: str | None = None
    """The graph's display name (None until the spec loaded)."""
    dataset: str | None = None
    """The dataset name or path."""
    split: str | None = None
    """The dataset split."""
    worker_count: int | None = None
    """Worker subprocesses of the run."""
    status: SummaryStatus
    """running, done, failed or cancelled, as the run process wrote it."""
    error: str | None = None
    """Why the run failed (e.g. the graph could not load, every episode errored)."""
    episodes_total: int | None = None
    """Episodes selected (None in a summary rebuilt from its rows)."""
    episodes_finished: int = 0
    """Episodes with a row."""
    counts_by_status: dict[str, int] = Field(default_factory=dict)
    """Rows per episode status."""
    metrics: dict[str, float] = Field(default_factory=dict)
    """Mean of each metric over ok, error and timeout episodes (failures score 0)."""
    metrics_ci95: dict[str, tuple[float, float] | None] = Field(default_factory=dict)
    """Student-t 95% interval of each mean, clipped to the metric's range (None: n < 2)."""
    metrics_n: dict[str, int] | None = None
    """Episodes behind each mean."""
    metrics_ok_only: dict[str, float] | None = None
    """Means over ok episodes only (for diagnosis)."""
    metrics_ok_only_ci95: dict[str, tuple[float, float] | None] | None = None
    """Intervals of the ok-only means."""
    metrics_ok_only_n: dict[str, int] | None = None
    """Episodes behind each ok-only mean."""
    error_count: int | None = None
    """Episodes that ended in error or timeout."""
    first_error: FirstError | None = None
    """The lowest-index of those, or None."""
    max_error_rate: float | None = None
    """The share of errored episodes the spec allows."""
    error_rate_exceeded: bool | None = None
    """True when more than that share errored (``evaltui eval`` then exits 1)."""
    started_at: str | None = None
    """When the run process started (ISO 8601, local time)."""
    updated_at: str | None = None
    """When this snapshot was written."""
    finished_at: str | None = None
    """When the run process finished; None while running."""
    elapsed_sec: float | None = None
    """Run time so far."""
    rows_file: str | None = None
    """A running snapshot's rows are not in it but in this file beside it (``rows.jsonl``,
    :data:`ROWS_FILENAME`), and in the episode dirs; None in a final summary (and in those
    of earlier versions), whose ``episodes`` hold every row."""
    disk_wait: DiskWaitNote | None = None
    """Set once a write of the run had to wait for room on a full disk; None otherwise."""
    replicas: dict[str, list[ReplicaNote]] | None = None
    """Per replicated shared nodeset, its replicas; None when the graph has none."""
    stopped: StoppedNote | None = None
    """Set when the run's stop rule was met and it stopped dealing; None otherwise."""
    check_notes: list[str] | None = None
    """What the nodesets' own checks said at spec check (e.g. the renderer a benchmark
    probed and a frame's cost); None when they said nothing."""
    summary_unreadable: str | None = None
    """Set only on a summary rebuilt from episode.json files: why summary.json itself
    could not be read. Never written by the run process."""


class Summary(SummaryHeader):
    """summary.json: the header plus every finished episode's row, in episode order."""

    episodes: list[EpisodeRow] = Field(default_factory=list)
    """The rows as of this write (episode.json of episodes finished since are newer); in a
    running snapshot (``rows_file`` set) none: they are in that file."""


# ---- reading ------------------------------------------------------------------------------
