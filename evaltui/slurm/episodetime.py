"""How long one episode of a run is expected to take, to warn at submission about an
``eval.slurm.time`` that could never fit one (docs/slurm.md).

Two sources, the first that says:

1. an earlier run of the same graph on the same dataset and split, under the same outputs
   root: its longest ``ok`` episode (``elapsed_sec`` of summary.json's rows). Only the
   newest :data:`LOOK_BACK` run dirs are read, so that the check stays cheap beside
   thousands of runs; measured on whatever machine ran it, so a hint, not a bound;
2. the run's own ceiling: ``per_step_budget_sec`` x ``step_budget`` (the longest an
   episode may take before it ends ``timeout``), where a per-step budget is set.

Without either nothing is said: nothing is known of how long an episode takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evaltui.contract.slurmoptions import SlurmOptions
from evaltui.rundir.layout import is_run_id
from evaltui.rundir.summaryfile import read_summary

LOOK_BACK = 20
"""How many of the newest run dirs are looked at for an earlier run's episode time."""


@dataclass(frozen=True)
class EpisodeTime:
    seconds: float
    basis: str
    """Where the number comes from, said in the warning."""


def measured_episode(runs_dir: Path, graph_name: str, dataset: str, split: str | None,
                     exclude: str | None = None) -> EpisodeTime | None:
    """The longest ``ok`` episode of the newest earlier run of this graph on this dataset
    and split among the newest :data:`LOOK_BACK` run dirs of ``runs_dir``."""
    try:
        names = sorted((n.name for n in runs_dir.iterdir() if is_run_id(n.name)),
                       reverse=True)
    except OSError:
        return None
    for name in [n for n in names if n != exclude][:LOOK_BACK]:
        summary = read_summary(runs_dir / name)
        if summary is None or summary.get("graph_name") != graph_name \
                or summary.get("dataset") != dataset or summary.get("split") != split:
            continue
        times = [r["elapsed_sec"] for r in summary.get("episodes") or []
                 if isinstance(r, dict) and r.get("status") == "ok"
                 and isinstance(r.get("elapsed_sec"), int | float)]
        if times:
            return EpisodeTime(max(times), f"the longest episode of run {name}")
    return None


def budget_episode(per_step_budget_sec: float | None, step_budget: int | None
                   ) -> EpisodeTime | None:
    """The longest an episode may run: its per-step budget times its step budget."""
    if per_step_budget_sec is None or step_budget is None:
        return None
    return EpisodeTime(per_step_budget_sec * step_budget,
                       f"per_step_budget_sec {per_step_budget_sec:g} x step_budget "
                       f"{step_budget}")


def time_limit_warning(options: SlurmOptions, expected: EpisodeTime | None,
                       signal_before_s: int = 0) -> str | None:
    """A warning when the job's time limit, less the ``signal_before_s`` seconds before it
    at which the run is told to stop (``--signal=B:USR1@90``), cannot fit one episode."""
    if expected is None:
        return None
    return options.short_time_warning(expected.seconds, basis=expected.basis,
                                      signal_before_s=signal_before_s)


def signal_offset(signal: str | None) -> int:
    """The seconds of sbatch's ``--signal=[B:]SIG[@TIME]`` (Slurm's default: 60)."""
    if not signal:
        return 0
    _, at, when = signal.partition("@")
    return int(when) if at and when.isdigit() else 60
