"""Experiment sets (DESIGN §12): the set file and the set dir's set.json -- the contract.

A set file names a ``base`` (the options of ``evaltui eval`` by their long names), a
``matrix`` of axes whose cartesian product are the members, ``include``/``exclude``
entries and an optional ``baseline``. :func:`parse_set_file` checks its shape only; the
expansion into member specs and the checks against the graphs live in
:mod:`evaltui.sets.expansion`. Every refusal is a :class:`SetFileError` whose message
starts with the dotted path of the field at fault. Depends on pydantic and yaml only.
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evaltui.contract.slurmoptions import SlurmOptions
from evaltui.contract.states import RunState

SETS_DIRNAME = "eval_sets"
"""Under the outputs root: one directory per set, named by its set_id."""
DEFAULT_ARRAY_PARALLELISM = 4
"""Members of a Slurm job array running at once unless the set says
(``base.slurm_array_parallelism``; ``%4``)."""
SET_FILENAME = "set.json"
"""The set dir's record (:class:`SetRecord`)."""
STOP_FILENAME = "STOP"
"""``set watch`` ends when this file appears in the set dir (or in the watched dir)."""

NAMED_AXES = ("graph", "split", "repeat", "checkpoint")
"""Matrix keys that are not ``NODESET.PARAM``."""
DEFAULT_REPEAT_PARAM = "policy.seed"
"""The param ``repeat: N`` sets to the repeat index (0..N-1)."""
DEFAULT_CHECKPOINT_PARAM = "policy.weights"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_PARAM = re.compile(r"^[A-Za-z_][\w-]*\.[A-Za-z_]\w*$")


class SetFileError(ValueError):
    """A set file is invalid; ``field`` is the dotted path of the field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class _MemberStateFinished:
    @property
    def finished(self) -> bool:
        """Its run has ended: one of the run's terminal states (:attr:`RunState.terminal`)."""
        return self is not MemberState.PENDING and RunState(self).terminal


MemberState = StrEnum("MemberState", [("PENDING", "pending"), *((s.name, s.value)
                                                               for s in RunState)],
                      module=__name__, type=_MemberStateFinished)
"""A member's state in set.json: its run's state (:class:`RunState`'s values), or ``pending``
before it has one (new to the file, or held back by ``--max-error-rate``)."""


class BaseOptions(BaseModel):
    """``base``: what ``evaltui eval`` (and ``submit``) take, by their long names."""

    model_config = ConfigDict(extra="forbid")

    graph: str | None = None
    """A built-in graph name, a graph file or a JobSpec file (relative to the set file)."""
    dataset: str | None = None
    split: str | None = None
    episodes: int | None = Field(default=None, ge=1)
    start: int | None = Field(default=None, ge=0)
    indices: str | list[int] | None = None
    workers: int | None = Field(default=None, ge=1)
    step_budget: int | None = Field(default=None, ge=1)
    step_timeout: float | None = Field(default=None, gt=0)
    max_error_rate: float | None = Field(default=None, ge=0, le=1)
    """Per member, the share of episodes that may error (as ``eval --max-error-rate``)."""
    executor: Literal["local", "ray", "slurm"] | None = None
    """``slurm``: the members go to Slurm as one job array (docs/slurm.md)."""
    ray_address: str | None = None
    slurm: SlurmOptions | None = None
    """``eval.slurm`` of every member (partition, time, ...), as ``--slurm-*``."""
    slurm_array_parallelism: int | None = Field(default=None, ge=1)
    """With ``executor: slurm``: how many members of the array run at once (``%P``)."""
    set: dict[str, Any] = Field(default_factory=dict)
    """``NODESET.PARAM`` overrides, as ``--set``."""
    workspace: str | None = None
    priority: int | None = Field(default=None, ge=-100, le=100)
    vram_mb: int | None = Field(default=None, ge=0)
    exclusive: bool | None = None
    tie_to_backend: bool | None = None


class CheckpointAxis(BaseModel):
    """``matrix.checkpoint``: one member per file matching ``glob`` (under ``watch`` for
    ``set watch``), passed to the run as ``param``; its step is the last number in the
    file's name."""

    model_config = ConfigDict(extra="forbid")

    glob: str
    param: str = DEFAULT_CHECKPOINT_PARAM
    watch: str | None = None
    """A directory training writes checkpoints into (``set watch`` follows it)."""

    @field_validator("glob")
    @classmethod
    def _relative_glob(cls, glob: str) -> str:
        # The glob stays under the set file's (or the watched) dir: an absolute one or one
        # climbing out with '..' would record files of anywhere as checkpoints.
        if not glob or glob.startswith(("/", "~")) or ".." in PurePosixPath(glob).parts:
            raise ValueError(f"{glob!r} must be relative to the set file's directory (or "
                             "to watch), without '..': put the directory in watch")
        return glob


class RaceOptions(BaseModel):
    """``race``: the members are evaluated in rounds of the same seeded dealing order and
    a member whose confidence sequence lies wholly below the best member's stops being fed
    (successive elimination, :mod:`evaltui.sets.racing`; docs/sets.md)."""

    model_config = ConfigDict(extra="forbid")

    metric: str = "success"
    """The metric raced on: one bounded in [0, 1] (success, spl, ndtw, sdtw)."""
    alpha: float = Field(default=0.05, gt=0, lt=1)
    """The chance that the best member is eliminated at all, over the whole race: each
    member's sequence is at ``alpha / members`` (Bonferroni over the members)."""
    round: int = Field(default=20, ge=1)
    """Episodes of the order each surviving member runs per round."""
    target: Literal["split", "policy"] = "split"
    """What each member's interval is for: ``split``, its mean over this split's episodes
    (the without-replacement sequence: what a full sweep reports, closing to it at the end
    of the split); ``policy``, its expected value on the distribution the split samples
    (with replacement: wider, never closes; for stochastic members of near-equal quality,
    whose realized split means differ by the split's luck)."""
    seed: int | None = Field(default=None, ge=0)
    """The dealing order's seed (every member's ``eval.order_seed``); default: drawn
    from the set's name, so every ``set run`` of the set deals the same order."""


class SetFile(BaseModel):
    """A whole set file, as checked by :func:`parse_set_file`."""

    model_config = ConfigDict(extra="forbid")

    name: str
    base: BaseOptions = Field(default_factory=BaseOptions)
    matrix: dict[str, Any] = Field(default_factory=dict)
    """Axis -> values: ``graph``/``split``/``NODESET.PARAM`` lists, ``repeat`` an int,
    ``checkpoint`` a :class:`CheckpointAxis` (dumped)."""
    include: list[dict[str, Any]] = Field(default_factory=list)
    exclude: list[dict[str, Any]] = Field(default_factory=list)
    baseline: dict[str, Any] | None = None
    race: RaceOptions | None = None

    @property
    def checkpoint(self) -> CheckpointAxis | None:
        raw = self.matrix.get("checkpoint")
        return CheckpointAxis.model_validate(raw) if raw is not None else None


class SetMemberRecord(BaseModel):
    """One member in set.json."""

    model_config = ConfigDict(extra="allow")

    key: str
    """A stable hash of the member's resolved spec."""
    axes: dict[str, Any]
    run_id: str | None = None
    state: MemberState = MemberState.PENDING
    attempts: int = 0
    """Submissions and resumes of this member so far (all ``set run`` calls together)."""
    error: str | None = None
    """Why its last attempt did not end ``done``."""
    run_dir: str | None = None
    """Its run's directory, as the scheduler reported it."""
    eliminated_at: int | None = None
    """In a race: the n (episodes of the order) at which it was eliminated."""
    race_interval: list[float] | None = None
    """In a race: its confidence sequence (at the race's per-member level) at its last
    round, ``[lo, hi]``."""


class RaceStanding(BaseModel):
    """set.json ``race``: where a racing set stands after its last round."""

    model_config = ConfigDict(extra="allow")

    metric: str
    target: str = "split"
    """``split`` (each member's mean over the split) or ``policy`` (its expected value)."""
    alpha: float
    member_alpha: float
    """Each member's level: ``alpha / members`` (Bonferroni)."""
    n: int
    """Episodes of the order the surviving members have run."""
    full_n: int
    survivors: list[str]
    """The keys of the members still fed."""
    decided: bool = False
    """One member left, or the split exhausted."""


class SetRecord(BaseModel):
    """set.json: the set file as given, and every member with its run."""

    model_config = ConfigDict(extra="allow")

    set_id: str
    name: str
    file: dict[str, Any]
    base_dir: str
    """The set file's directory: relative paths in ``file`` are relative to it."""
    members: list[SetMemberRecord] = Field(default_factory=list)
    race: RaceStanding | None = None


def parse_set_file(data: Any) -> SetFile:
    """Check a set file's shape; raises SetFileError naming the field."""
    if not isinstance(data, dict):
        raise SetFileError("<set file>", "must be a mapping with name, base and matrix")
    data = dict(data)
    if isinstance(data.get("base"), dict):
        data["base"] = {str(k).replace("-", "_"): v for k, v in data["base"].items()}
    matrix = data.get("matrix")
    if matrix is not None and not isinstance(matrix, dict):
        raise SetFileError("matrix", "must be a mapping of axis -> values")
    for axis, values in (matrix or {}).items():
        _check_axis(str(axis), values)
    try:
        parsed = SetFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "<set file>"
        raise SetFileError(loc, err["msg"].removeprefix("Value error, ")) from None
    if not _NAME.fullmatch(parsed.name):  # match's $ would let a trailing newline in
        raise SetFileError("name", f"{parsed.name!r} must be 1-100 letters, digits, '.', '_' "
                           "or '-' (it names the set dir)")
    for key in parsed.base.set:
        if not _PARAM.match(key):
            raise SetFileError(f"base.set.{key}", "must look like NODESET.PARAM")
    if parsed.race is not None:
        _check_race(parsed)
    return parsed


def _check_race(parsed: SetFile) -> None:
    """What a race needs of the rest of the file: one split (the members deal the same
    episodes), a fixed set of members (the correction is over their number), rounds
    driven by ``set run`` (a Slurm array runs each member to its end)."""
    if "split" in parsed.matrix:
        raise SetFileError("race", "the members of a race deal the same episodes: no split "
                           "axis (give base.split)")
    if parsed.checkpoint is not None and parsed.checkpoint.watch is not None:
        raise SetFileError("race", "not with matrix.checkpoint.watch: the level is corrected "
                           "for a fixed number of members")
    if parsed.base.executor == "slurm":
        raise SetFileError("race", "not with executor: slurm (a job array runs each member "
                           "to its end; race with a local or ray executor)")


def _check_axis(axis: str, values: Any) -> None:
    field = f"matrix.{axis}"
    if axis == "repeat":
        if not isinstance(values, int) or isinstance(values, bool) or values < 1:
            raise SetFileError(field, f"must be a whole number >= 1, got {values!r}")
        return
    if axis == "checkpoint":
        try:
            CheckpointAxis.model_validate(values)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise SetFileError(f"{field}.{loc}" if loc else field,
                               err["msg"].removeprefix("Value error, ")) from None
        return
    if axis not in NAMED_AXES and not _PARAM.match(axis):
        raise SetFileError(field, "unknown axis (graph, split, repeat, checkpoint or "
                           "NODESET.PARAM)")
    if not isinstance(values, list):
        raise SetFileError(field, f"must be a list of values, got {values!r}")
    if not values:
        raise SetFileError(field, "is empty: the product of the axes has no member")
    if axis in ("graph", "split") and not all(isinstance(v, str) for v in values):
        raise SetFileError(field, "must be a list of names")


def load_set_file(path: Path) -> tuple[SetFile, dict[str, Any]]:
    """The checked set file at ``path`` (YAML or JSON) and its data as given."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SetFileError("<set file>", f"cannot read {path}: {exc.strerror or exc}") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SetFileError("<set file>", f"{path}: not valid JSON ({exc})") from None
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            first = str(exc).splitlines()[0]
            raise SetFileError("<set file>", f"{path}: not valid YAML ({first})") from None
    return parse_set_file(data), data


def member_label(axes: dict[str, Any], *, step_names_checkpoint: bool = False) -> str:
    """A member by its axis values, ``(base)`` for none; with ``step_names_checkpoint``
    without the checkpoint's file (long), which its step names."""
    shown = {k: v for k, v in axes.items() if not (k == "checkpoint" and step_names_checkpoint)}
    return " ".join(f"{k}={v}" for k, v in shown.items()) or "(base)"


def is_set_name(name: str) -> bool:
    """True if ``name`` is a well-formed set name (so it is safe to join under eval_sets/)."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None
