"""Hold every member's spec to its graph and dataset before anything is written.

The engine's own check (:func:`evaltui.engine.specchecks.validate_spec`: imports the
nodeset impls, checks each param against its class, selects the episodes) runs on each
member; its error names a JobSpec field, which is turned back into the set-file field
the value came from (``eval.selectors.policy.bogus`` -> ``matrix.policy.bogus``).
"""

from __future__ import annotations

from evaltui.contract.setspec import DEFAULT_REPEAT_PARAM, SetFile, SetFileError
from evaltui.contract.spec import SpecError
from evaltui.engine.graph.specchecks import metric_absent, validate_in_workspace
from evaltui.sets.expansion import Expansion, Member
from evaltui.sets.racing import check_race_metric

_EVAL_OPTION = {"episode_count": "episodes", "start_episode_index": "start",
                "episode_indices": "indices", "worker_count": "workers",
                "per_step_budget_sec": "step_timeout", "step_budget": "step_budget",
                "max_error_rate": "max_error_rate", "executor": "executor",
                "ray_address": "ray_address"}


def check_members(expansion: Expansion) -> list[str]:
    """Check each member; returns the warnings of the first (one per distinct text).

    Raises SetFileError naming the set-file field at fault.
    """
    warnings: list[str] = []
    if expansion.setfile.race is not None:
        check_race_metric(expansion.setfile.race)
    for member in expansion.members:
        try:
            checked = validate_in_workspace(member.spec)  # imports its workspace's nodesets
        except SpecError as exc:
            field = set_file_field(expansion.setfile, member, exc.field)
            raise SetFileError(field, exc.message) from None
        race = expansion.setfile.race
        if race is not None and (why := metric_absent(checked.spec.eval.dataset, race.metric)):
            raise SetFileError("race.metric", why)
        warnings += [w for w in checked.warnings if w not in warnings]
    return warnings


def set_file_field(setfile: SetFile, member: Member, spec_field: str) -> str:
    """The set-file field a JobSpec field of ``member`` came from."""
    param = _param(spec_field)
    if param is not None:
        if param in member.axes:
            return f"matrix.{param}"
        axis = setfile.checkpoint
        if axis is not None and param == axis.param and "checkpoint" in member.axes:
            return "matrix.checkpoint.param"
        if param == DEFAULT_REPEAT_PARAM and "repeat" in member.axes:
            return "matrix.repeat"
        return f"base.set.{param}"
    head = spec_field.split(".")[:2]
    if head == ["eval", "split"] or head == ["eval", "dataset"]:
        name = head[1]
        return f"matrix.{name}" if name in member.axes else f"base.{name}"
    if head[0] == "eval" and len(head) > 1 and head[1] in _EVAL_OPTION:
        return f"base.{_EVAL_OPTION[head[1]]}"
    if head[0] == "graph":
        return "matrix.graph" if "graph" in member.axes else "base.graph"
    return f"base ({spec_field})"


def _param(spec_field: str) -> str | None:
    """``policy.noise`` from ``eval.selectors.policy.noise`` or
    ``graph.nodesets.policy.params.noise``."""
    parts = spec_field.split(".")
    if parts[:2] == ["eval", "selectors"] and len(parts) >= 4:
        return f"{parts[2]}.{parts[3]}"
    if parts[:2] == ["graph", "nodesets"] and len(parts) >= 5 and parts[3] == "params":
        return f"{parts[2]}.{parts[4]}"
    return None
