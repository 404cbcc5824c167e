"""RunSnapshot: what one run shares -- its header, numbers, rows and state, read once.

``evaltui report`` and every tracker of ``evaltui export`` read a run dir through this
one reader, so the page and the trackers carry the same numbers. Those numbers are
summary.json's own when it is final (status done, failed or cancelled). Otherwise -- the
run is still going, it ended without a final write, or summary.json is torn -- they are
recomputed from the finished episodes' rows by the run's own rule
(:func:`evaltui.results.rebuild.rebuild_summary`), and :attr:`RunSnapshot.numbers_from`
says which. Rows come from :func:`evaltui.results.runrows.load_run` (summary rows, plus
any newer episode.json), never from a reader of our own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaltui.contract.records import SPEC_FILENAME
from evaltui.contract.states import RunState
from evaltui.engine.episode.metrics import METRIC_RANGES
from evaltui.results.rebuild import rebuild_summary
from evaltui.results.runrows import load_run
from evaltui.results.stopnote import stop_line
from evaltui.rundir.safeopen import object_inside_or_none
from evaltui.rundir.status import read_run_status
from evaltui.runview.running_mean import RunningMeans, Series

FINAL_SUMMARY = ("done", "failed", "cancelled")
FAILURE_STATUSES = ("error", "timeout")
RATE_METRICS = tuple(name for name, bounds in METRIC_RANGES.items() if bounds == (0.0, 1.0))
"""Metrics in [0, 1] (success, spl, ndtw, sdtw): the running-means plot and series."""


@dataclass(frozen=True)
class MetricLine:
    """One metric of the run: mean, 95% CI, n, and the mean over ok episodes only."""

    name: str
    mean: float
    ci95: tuple[float, float] | None
    n: int | None
    ok_only: float | None


@dataclass(frozen=True)
class RunSnapshot:
    """One run dir as shared: read by :func:`read_snapshot`."""

    run_dir: Path
    run_id: str
    state: RunState
    state_note: str | None
    """Why an aborted run ended, as the status read says."""
    summary: dict[str, Any]
    """The numbers shared: summary.json as written, or rebuilt from the rows (see
    :attr:`numbers_from`); its header fields are summary.json's where it is readable."""
    rows: list[dict[str, Any]]
    """Every finished episode's row, in episode order."""
    spec: dict[str, Any] | None
    """spec.json (the JobSpec as submitted), or None if absent or unreadable."""
    numbers_from: str
    """``summary.json``, or why the numbers were recomputed from the episode rows."""
    problems: list[str] = field(default_factory=list)
    """Files of the run dir that could not be used."""

    # ---- header ---------------------------------------------------------------------

    @property
    def executor(self) -> str:
        ev = (self.spec or {}).get("eval") or {}
        return str(ev.get("executor") or "local")

    @property
    def finished(self) -> bool:
        """The run is over (whatever its outcome): nothing more will be written."""
        return self.state.terminal

    @property
    def error_count(self) -> int:
        counts = self.summary.get("counts_by_status") or {}
        return sum(int(counts.get(s) or 0) for s in FAILURE_STATUSES)

    @property
    def scored_count(self) -> int:
        counts = self.summary.get("counts_by_status") or {}
        return sum(int(counts.get(s) or 0) for s in ("ok", *FAILURE_STATUSES))

    # ---- numbers --------------------------------------------------------------------

    def metrics(self) -> list[MetricLine]:
        """The run's metrics in the summary's order."""
        cis = self.summary.get("metrics_ci95") or {}
        ns = self.summary.get("metrics_n") or {}
        ok_only = self.summary.get("metrics_ok_only") or {}
        lines = []
        for name, mean in (self.summary.get("metrics") or {}).items():
            if not _finite(mean):
                continue
            ci = cis.get(name)
            pair = (float(ci[0]), float(ci[1])) if isinstance(ci, list | tuple) \
                and len(ci) == 2 and all(_finite(x) for x in ci) else None
            n = ns.get(name)
            lines.append(MetricLine(str(name), float(mean), pair,
                                    n if isinstance(n, int) else None,
                                    float(ok_only[name]) if _finite(ok_only.get(name))
                                    else None))
        return lines

    def metric_names(self) -> list[str]:
        """The columns of the episode table: the summary's metrics, then any other an
        episode row has, in the order first seen."""
        names = list((self.summary.get("metrics") or {}).keys())
        for row in self.rows:
            names += [n for n in row.get("metrics") or {} if n not in names]
        return names

    def notes(self) -> list[str]:
        """One line each: how errors count, what is not finished, what could not be read."""
        lines = []
        why = self.summary.get("error")
        if isinstance(why, str) and why.strip():
            lines.append(f"run {self.state.value}: {why.strip().splitlines()[0]}")
        if self.error_count:
            lines.append(f"errors count as failures ({self.error_count} of "
                         f"{self.scored_count} episodes errored)")
        if not self.finished:
            total = self.summary.get("episodes_total")
            of = f" of {total}" if isinstance(total, int) else ""
            lines.append(f"run still {self.state.value}: {len(self.rows)}{of} episodes "
                         "finished so far; the numbers are over those")
        elif self.state is RunState.ABORTED:
            lines.append(f"run aborted ({self.state_note or 'no terminal summary'}): "
                         f"{len(self.rows)} episodes finished")
        if (stopped := stop_line(self.summary)) is not None:  # the CS, named as one
            lines.append(stopped)
        if self.numbers_from != "summary.json" and self.finished:
            lines.append(f"numbers recomputed from the episode rows: {self.numbers_from}")
        lines += self.problems
        return lines

    def running_means(self, points: int = 200) -> dict[str, Series]:
        """Running mean and 95% CI of each rate metric, episodes in finishing order."""
        means = RunningMeans()
        means.update(self.rows)
        have = self.summary.get("metrics") or {}
        return {name: means.series(name, points) for name in RATE_METRICS if name in have}

    def steps(self) -> list[int]:
        """Step counts of the scored episodes."""
        means = RunningMeans()
        means.update(self.rows)
        return means.steps()


def read_snapshot(run_dir: Path) -> RunSnapshot:
    """The shared view of ``run_dir``; RunDirError if it is no run dir."""
    loaded = load_run(Path(run_dir))
    status = read_run_status(loaded.run_dir)
    summary = loaded.summary
    final = summary is not None and summary.get("status") in FINAL_SUMMARY
    if final:
        numbers: dict[str, Any] = dict(summary or {})
        numbers["episodes"] = loaded.rows
        numbers_from = "summary.json"
    else:
        if summary is None:
            reason = next((p for p in loaded.problems if "summary.json" in p),
                          "summary.json is missing")
        else:
            reason = f"summary.json was last written while the run was {summary.get('status')}"
        rebuilt = rebuild_summary(loaded.run_dir, status.state, reason) or {}
        rebuilt.pop("summary_unreadable", None)
        header = {k: v for k, v in (summary or {}).items() if k not in _NUMBER_KEYS}
        numbers = {**rebuilt, **{k: v for k, v in header.items() if v is not None}}
        numbers_from = reason
    return RunSnapshot(
        run_dir=loaded.run_dir, run_id=loaded.run_id, state=status.state,
        state_note=status.note, summary=numbers, rows=loaded.rows,
        spec=object_inside_or_none(loaded.run_dir, SPEC_FILENAME), numbers_from=numbers_from,
        problems=list(loaded.problems))


_NUMBER_KEYS = frozenset({
    "status", "episodes_finished", "counts_by_status", "metrics", "metrics_ci95", "metrics_n",
    "metrics_ok_only", "metrics_ok_only_ci95", "metrics_ok_only_n", "error_count",
    "episodes"})


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value)
