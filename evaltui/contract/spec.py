"""JobSpec: everything a run needs (DESIGN §4) -- the contract, depending on nothing.

:func:`parse_spec` checks types and ranges; the engine's
:func:`evaltui.engine.graph.specchecks.check_spec` then resolves the graph (imports every
nodeset impl, checks the DAG) and the dataset selection. Both raise :class:`SpecError`,
whose message starts with the dotted path of the field at fault.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evaltui.contract.slurmoptions import SlurmOptions
from evaltui.contract.stoprule import parse_rule

DEFAULT_STEP_BUDGET = 200
"""Steps per episode when neither the spec nor the env nodeset gives a limit."""


PER_GPU = "per_gpu"
"""A shared nodeset's ``replicas: "per_gpu"``: one host on every GPU the run is given
(DESIGN §12 "Replicas"; the graph model checks it, ``--replicas`` sets it)."""


class SpecError(ValueError):
    """A JobSpec is invalid; ``field`` is the dotted path of the field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class EvalSection(BaseModel):
    """What to run: the graph variant and which episodes of which split."""

    model_config = ConfigDict(extra="forbid")

    graph_name: str | None = None
    """Display name of the graph; defaults to the graph's own name."""
    selectors: dict[str, Any] = Field(default_factory=dict)
    """Param overrides, ``{"policy.noise": 0.1}``."""
    dataset: str = "babyai"
    split: str | None = None
    """Split name; defaults to GoToLocal for babyai and to the file stem for a .jsonl file."""
    episode_count: int | None = Field(default=None, ge=1)
    """How many episodes from ``start_episode_index``; None = to the end of the split."""
    step_budget: int | None = Field(default=None, ge=1)
    """Steps per episode before it is ended (status ok, not a success). Default: the env
    nodeset's own limit (BabyAI: its ``max_steps``, 64 on GoToLocal, 576 on GoTo), else
    DEFAULT_STEP_BUDGET; spec.json records the value used."""
    start_episode_index: int = Field(default=0, ge=0)
    worker_count: int = Field(default=1, ge=1, le=256)
    per_step_budget_sec: float | None = Field(default=None, gt=0)
    """A step slower than this ends the episode with status ``timeout``."""
    reset_budget_sec: float | None = Field(default=None, gt=0)
    """An env reset (``set_episode``) slower than this ends the episode ``timeout`` and
    replaces its worker. Default: with ``per_step_budget_sec`` set, the larger of 60 s and
    10x it; without, unbounded."""
    episode_indices: list[int] | None = None
    """Explicit episode indices; win over start/count."""
    episode_selectors: dict[str, str] = Field(default_factory=dict)
    """Keep episodes whose field matches a regex, ``{"scene_id": "seed=1\\d$"}``."""
    max_episode_retries: int = Field(default=0, ge=0, le=10)
    max_error_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    """Share of episodes that may end ``error``/``timeout`` before ``evaltui eval`` exits 1
    (they count as failures in the metrics either way)."""
    executor: Literal["local", "ray", "slurm"] = "local"
    """Where the ``worker_count`` workers run: ``local`` subprocesses of the run, ``ray``
    actors spread over a Ray cluster (needs ``pip install 'evaltui[ray]'``; docs/pool.md),
    or ``slurm`` job steps of the run's Slurm allocation (docs/slurm.md). The rows are the
    same either way (a non-local executor's rows also name their ``node``)."""
    ray_address: str | None = None
    """The Ray cluster to run on with ``executor = "ray"`` (``HOST:PORT`` of its head, as
    ``ray start --head`` prints); default ``$RAY_ADDRESS``, else ``auto`` (the cluster
    ``ray start`` left running on this machine)."""
    slurm: SlurmOptions = Field(default_factory=SlurmOptions)
    """What a ``slurm`` run asks of Slurm (partition, time, CPUs and memory per worker,
    ...); ignored by the other executors."""
    stop_when: str | None = None
    """Stop dealing once the metric's 95 % confidence sequence meets this rule
    (``success:width<=0.1``, ``success>=0.8``; docs/statistics.md); None: run them all."""
    order_seed: int | None = Field(default=None, ge=0)
    """Deal the episodes in the random order this seed draws (stratified by ``task``);
    drawn and recorded in spec.json when ``stop_when`` is set without one."""
    max_episodes: int | None = Field(default=None, ge=1)
    """Deal at most this many episodes of the (ordered) selection."""
    past_stop: bool = False
    """Keep dealing once ``stop_when`` is met, up to ``max_episodes`` (``resume --more``
    sets it: the confidence sequence stays valid, it is valid at any n)."""

    @field_validator("stop_when")
    @classmethod
    def _rule_parses(cls, value: str | None) -> str | None:
        if value is not None:
            parse_rule(value)  # its ValueError names what is wrong
        return value

    @field_validator("episode_indices")
    @classmethod
    def _indices_non_negative(cls, value: list[int] | None) -> list[int] | None:
        if value is not None:
            if not value:
                raise ValueError("must not be empty (omit it to use start/count)")
            for i, index in enumerate(value):
                if index < 0:
                    raise ValueError(f"item {i} is {index}: indices must be >= 0")
            # Each episode runs once: [0, 0, 0] would run one episode without a word.
            repeated = sorted({x for x in value if value.count(x) > 1})
            if repeated:
                raise ValueError(f"{', '.join(map(str, repeated))} given more than once "
                                 "(each episode runs once; a repeat is a separate run)")
        return value

    @field_validator("episode_selectors")
    @classmethod
    def _selectors_compile(cls, value: dict[str, str]) -> dict[str, str]:
        for key, pattern in value.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{key}: invalid regex {pattern!r}: {exc}") from None
        return value


class SchedulingSection(BaseModel):
    """How the scheduler treats the run (admission, priority, lifetime)."""

    model_config = ConfigDict(extra="forbid")

    marginal_vram_mb: int = Field(default=0, ge=0)
    """Declared VRAM need, used when no calibration exists."""
    exclusive_gpu: bool = False
    priority: int = Field(default=0, ge=-100, le=100)
    tie_to_backend: bool = False
    """Kill the run when the backend that spawned it dies (PR_SET_PDEATHSIG)."""
    cpus_per_worker: float | None = Field(default=None, gt=0, le=256)
    """CPU cores each worker needs, when no earlier run of the graph was measured
    (default 1); admission reserves workers x this (docs/scheduler.md, "CPU cores")."""
    host_mem_mb: int | None = Field(default=None, ge=0)
    """Declared host memory of the whole run (MiB), when its nodesets were never
    measured (default 256 per process: the run and each worker)."""
    set_id: str | None = None
    """The experiment set this run is a member of (``evaltui set run``): at equal
    priority the queue takes sets and lone runs in turn (fair share)."""
    set_member: str | None = None
    """Which member of ``set_id`` and which of its submissions (``{key}#{attempt}``): a
    ``set run`` killed before it recorded the run id finds the run again."""


class JobSpec(BaseModel):
    """The whole job: written to spec.json before the run subprocess is spawned."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    eval: EvalSection = Field(default_factory=EvalSection)
    scheduling: SchedulingSection = Field(default_factory=SchedulingSection)
    graph: dict[str, Any]
    shared_urls: dict[str, str] = Field(default_factory=dict, alias="_shared_urls")
    active_workspace_dir: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def parse_spec(data: Any) -> JobSpec:
    """Validate a JobSpec dict; the first error becomes a SpecError naming its field."""
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "<spec>"
        msg = err["msg"].removeprefix("Value error, ")
        raise SpecError(loc, msg) from None
