"""Per-step reward and success from an episode's log.jsonl, for ``evaltui verify``.

An env whose step node outputs ``reward`` and ``success`` beside ``done`` (Meta-World's)
has its ``return`` (the sum of the step rewards, in order) and ``steps_to_success`` (the
1-based step of the first ``success``) recomputed from the log rather than copied from
trajectory.json's ``extra``, and its ``success`` is whether any logged step succeeded. The
env step's records are the ``fire`` records whose outputs hold ``reward`` and ``done``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evaltui.contract.records import LOG_FILENAME
from evaltui.rundir.logread import iter_log
from evaltui.rundir.safeopen import kind_or_outside, open_inside


def step_outcomes(run_dir: Path, ep_rel: str) -> tuple[list[float], list[bool]] | None:
    """(rewards, successes) of the env's steps, in step order; None without a log or
    without such records."""
    rel = f"{ep_rel}/{LOG_FILENAME}"
    if kind_or_outside(run_dir, rel) != "file":
        return None
    rewards: list[float] = []
    successes: list[bool] = []
    with open_inside(run_dir, rel) as fh:
        for _, rec in iter_log(fh):
            out = rec.get("outputs")
            if rec.get("event") != "fire" or not isinstance(out, dict):
                continue
            if "reward" in out and "done" in out and isinstance(out["reward"], int | float):
                rewards.append(float(out["reward"]))
                if "success" in out:
                    successes.append(bool(out["success"]))
    return (rewards, successes) if rewards else None


def log_metrics(run_dir: Path, ep_rel: str, extra: dict[str, Any]) -> dict[str, float]:
    """The metrics of ``extra`` (return, steps_to_success) and success, from the log."""
    found = step_outcomes(run_dir, ep_rel)
    if found is None or ("return" not in extra and "steps_to_success" not in extra):
        return {}
    rewards, successes = found
    metrics: dict[str, float] = {}
    if "return" in extra:
        total = 0.0
        for r in rewards:
            total += r
        metrics["return"] = total
    if successes:
        first = next((i + 1 for i, s in enumerate(successes) if s), None)
        metrics["success"] = 1.0 if first is not None else 0.0
        if first is not None:
            metrics["steps_to_success"] = float(first)
    return metrics
