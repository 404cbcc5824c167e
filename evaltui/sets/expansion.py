"""A set file -> its members: axis values, the resolved JobSpec dict, a stable key.

Members are the cartesian product of the matrix axes in the file's order, then the
``include`` entries, less those an ``exclude`` entry matches (a partial match: every
axis it names has that value). Each member's spec is built by the one spec builder
(:func:`evaltui.engine.graph.specbuild.build_spec`) from ``base`` plus the member's axis
values, so a member is exactly the run ``evaltui eval`` would make of the same options. Nothing here
imports a nodeset: :mod:`evaltui.sets.checking` holds the specs to the graphs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from evaltui.contract.setspec import DEFAULT_REPEAT_PARAM, NAMED_AXES, SetFile, SetFileError
from evaltui.contract.spec import SpecError
from evaltui.engine.graph.benchmarks import get_benchmark
from evaltui.engine.graph.specbuild import build_spec
from evaltui.sets.raceorder import race_eval_fields

STEP_AXIS = "step"
"""The axis a checkpoint member's step is shown under (parsed from the file's name)."""
_STEP = re.compile(r"(\d+)")


@dataclass(frozen=True)
class Member:
    """One member of a set: what distinguishes it, and the run it is."""

    key: str
    axes: dict[str, Any]
    spec: dict[str, Any]


@dataclass(frozen=True)
class Expansion:
    """A set file's members in order, and the baseline among them (if it names one)."""

    setfile: SetFile
    base_dir: Path
    members: list[Member]
    baseline: Member | None


def member_key(spec: dict[str, Any]) -> str:
    """The hash of what a member evaluates (graph and eval section): scheduling fields
    (priority, VRAM) and the workspace path leave it unchanged."""
    what = {"graph": spec.get("graph"), "eval": spec.get("eval")}
    blob = json.dumps(what, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def checkpoint_step(path: Path) -> int | None:
    """The step in a checkpoint's file name: its last number (``ckpt_000300.npz`` -> 300)."""
    found = _STEP.findall(path.stem)
    return int(found[-1]) if found else None


def inside(root: Path, path: Path) -> bool:
    """Whether ``path``, links followed, is under ``root`` (a checkpoint linked to
    /etc/shadow is not one)."""
    return path.resolve().is_relative_to(root.resolve())


def checkpoint_files(setfile: SetFile, base_dir: Path) -> list[Path]:
    """The files the checkpoint axis names now, in step order (raises SetFileError)."""
    axis = setfile.checkpoint
    assert axis is not None
    root = base_dir / axis.watch if axis.watch else base_dir
    found = sorted(p for p in root.glob(axis.glob) if p.is_file())
    for path in found:
        if not inside(root, path):
            raise SetFileError("matrix.checkpoint.glob", f"{path.name} is a link to "
                               f"{path.resolve()}, outside {root}")
        if checkpoint_step(path) is None:
            raise SetFileError("matrix.checkpoint.glob", f"{path.name} has no step number in "
                               "its name")
    return sorted(found, key=lambda p: (checkpoint_step(p), p.name))


def expand(setfile: SetFile, base_dir: Path, *, set_id: str | None = None,
           checkpoints: Sequence[Path] | None = None) -> Expansion:
    """The members of ``setfile`` (relative paths are relative to ``base_dir``).

    ``checkpoints`` replaces the files the checkpoint axis's glob finds (``set watch``
    passes those that are complete). ``set_id`` tags every member's spec for the
    scheduler's fair share between sets. Raises SetFileError naming the field.
    """
    base_dir = Path(base_dir).resolve()
    axes = _axis_values(setfile, base_dir, checkpoints)
    names = list(axes)
    combos = [dict(zip(names, values, strict=True))
              for values in itertools.product(*axes.values())] if names else [{}]
    if "checkpoint" in axes:  # the step is an axis of its own: exclude/baseline may name it
        combos = [_with_step(c, base_dir) for c in combos]
    known = set(names) | set(NAMED_AXES) | {STEP_AXIS}
    for i, entry in enumerate(setfile.include):
        _check_entry(f"include[{i}]", entry, known, setfile)
        if not any(_combo_matches(c, entry) and len(c) == len(entry) for c in combos):
            combos.append(dict(entry))
    for i, entry in enumerate(setfile.exclude):
        _check_entry(f"exclude[{i}]", entry, known, setfile)
        kept = [c for c in combos if not _combo_matches(c, entry)]
        if len(kept) == len(combos):
            raise SetFileError(f"exclude[{i}]", f"{_show(entry)} matches no member")
        combos = kept
    if not combos and not (checkpoints is not None or _watching(setfile)):
        raise SetFileError("exclude", "leaves the set without a member")
    members = [_member(setfile, base_dir, combo, set_id) for combo in combos]
    seen: dict[str, Member] = {}
    for m in members:
        if m.key in seen:
            raise SetFileError("matrix", f"members {_show(seen[m.key].axes)} and "
                               f"{_show(m.axes)} are the same run")
        seen[m.key] = m
    return Expansion(setfile, base_dir, members, _baseline(setfile, members, known))


def _with_step(combo: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for axis, value in combo.items():
        out[axis] = value
        if axis == "checkpoint":
            out[STEP_AXIS] = checkpoint_step(base_dir / value)
    return out


def _watching(setfile: SetFile) -> bool:
    axis = setfile.checkpoint
    return axis is not None and axis.watch is not None


def _axis_values(setfile: SetFile, base_dir: Path, checkpoints: Sequence[Path] | None
                 ) -> dict[str, list[Any]]:
    axes: dict[str, list[Any]] = {}
    for axis, values in setfile.matrix.items():
        if axis == "repeat":
            axes[axis] = list(range(int(values)))
        elif axis == "checkpoint":
            files = list(checkpoints) if checkpoints is not None else \
                checkpoint_files(setfile, base_dir)
            spec = setfile.checkpoint
            assert spec is not None
            if not files and checkpoints is None:  # set watch passes what it found
                root = base_dir / spec.watch if spec.watch else base_dir
                hint = " (set watch waits for them)" if spec.watch else ""
                raise SetFileError("matrix.checkpoint.glob", f"{spec.glob!r} matches no file "
                                   f"under {root}{hint}")
            axes[axis] = [_relative(Path(p), base_dir) for p in files]
        else:
            axes[axis] = list(values)
    return axes


def _member(setfile: SetFile, base_dir: Path, combo: dict[str, Any], set_id: str | None
            ) -> Member:
    base = setfile.base
    params: dict[str, Any] = dict(base.set)
    target, split = base.graph, base.split
    axes: dict[str, Any] = {}
    for axis, value in combo.items():
        axes[axis] = value
        if axis == "graph":
            target = value
        elif axis == "split":
            split = value
        elif axis == "repeat":
            params[DEFAULT_REPEAT_PARAM] = value
        elif axis == "checkpoint":
            path = (base_dir / value).resolve()
            params[setfile.checkpoint.param if setfile.checkpoint else "policy.weights"] = \
                str(path)
        elif axis != STEP_AXIS:
            params[axis] = value
    graph_field = "matrix.graph" if "graph" in combo else "base.graph"
    if target is None:
        raise SetFileError("base.graph", "give a graph (base.graph or a matrix.graph axis)")
    indices = base.indices
    if isinstance(indices, list):
        indices = ",".join(str(i) for i in indices)
    workspace = base_dir / base.workspace if base.workspace else base_dir
    try:
        spec = build_spec(_target(target, base_dir), dataset=_dataset(base.dataset, base_dir),
                          split=split, episodes=base.episodes, start=base.start,
                          indices=indices, workers=base.workers, step_budget=base.step_budget,
                          step_timeout=base.step_timeout, max_error_rate=base.max_error_rate,
                          executor=base.executor, ray_address=base.ray_address,
                          slurm=base.slurm.model_dump(exclude_unset=True) if base.slurm
                          else None, sets=[f"{k}={json.dumps(v)}" for k, v in params.items()],
                          workspace=str(workspace))
    except SpecError as exc:
        field = graph_field if exc.field == "target" else f"base.{exc.field}"
        raise SetFileError(field, exc.message) from None
    scheduling = dict(spec.get("scheduling") or {})
    for key, value in (("priority", base.priority), ("marginal_vram_mb", base.vram_mb),
                       ("exclusive_gpu", base.exclusive),
                       ("tie_to_backend", base.tie_to_backend)):
        if value is not None:
            scheduling[key] = value
    if set_id is not None:
        scheduling["set_id"] = set_id
    spec["scheduling"] = scheduling
    if setfile.race is not None:  # one order for every member, a round at a time
        spec["eval"] = {**spec["eval"], **race_eval_fields(setfile.race, setfile.name)}
    return Member(member_key(spec), axes, spec)


def _target(target: str, base_dir: Path) -> str:
    path = base_dir / target
    return str(path) if path.is_file() else target


def _dataset(dataset: str | None, base_dir: Path) -> str | None:
    if dataset is None or get_benchmark(dataset) is not None:
        return dataset
    path = base_dir / dataset
    return str(path) if path.exists() else dataset


def _relative(path: Path, base_dir: Path) -> str:
    try:
        return str(path.resolve().relative_to(base_dir))
    except ValueError:
        return str(path.resolve())


def _check_entry(field: str, entry: Any, known: set[str], setfile: SetFile) -> None:
    if not isinstance(entry, dict) or not entry:
        raise SetFileError(field, "must be a mapping of axis -> value")
    for axis in entry:
        if axis not in known and "." not in str(axis):
            raise SetFileError(f"{field}.{axis}", "unknown axis (graph, split, repeat, "
                               "checkpoint or NODESET.PARAM)")


def _baseline(setfile: SetFile, members: list[Member], known: set[str]) -> Member | None:
    entry = setfile.baseline
    if entry is None or not members:  # a watch before its first checkpoint
        return None
    _check_entry("baseline", entry, known, setfile)
    return one_member(members, entry, "baseline")


class _HasAxes(Protocol):
    @property
    def axes(self) -> dict[str, Any]: ...


_Member = TypeVar("_Member", bound=_HasAxes)


def one_member(members: Sequence[_Member], entry: dict[str, Any], field: str) -> _Member:
    """The one of ``members`` (of a set, or rows of its table) whose axes have every value
    ``entry`` names; SetFileError on ``field`` if none or several do."""
    found = [m for m in members
             if all(same_value(m.axes.get(axis), value) for axis, value in entry.items())]
    if not found:
        raise SetFileError(field, f"{show_axes(entry)} is no member of the set")
    if len(found) > 1:
        raise SetFileError(field, f"{show_axes(entry)} matches {len(found)} members; name more "
                           "axes")
    return found[0]


def _combo_matches(combo: dict[str, Any], entry: dict[str, Any]) -> bool:
    return all(axis in combo and same_value(combo[axis], value) for axis, value in entry.items())


def same_value(a: Any, b: Any) -> bool:
    """Axis values compare as JSON does: 0 == 0.0, but True is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def show_axes(axes: dict[str, Any]) -> str:
    """A member's axes as its errors show them: ``{graph: bot, step: 300}``."""
    return "{" + ", ".join(f"{k}: {v}" for k, v in axes.items()) + "}"


_show = show_axes
