"""A summary rebuilt from the episode.json files, for a run whose summary.json is torn.

The run process writes summary.json atomically, so a torn one means someone else (a
copy, a full disk, a hand edit) broke it. Every episode's row is still in its own
episode.json: the rows, counts and metrics are recomputed from those with the same rule
the run uses, and ``summary_unreadable`` says that this is what a reader is looking at.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from evaltui.contract.states import RunState
from evaltui.engine.episode.metrics import aggregate
from evaltui.results.runrows import RunDirError, load_run

_FAILED = ("error", "timeout")


def rebuild_summary(run_dir: Path, state: RunState, reason: str | None = None
                    ) -> dict[str, Any] | None:
    """The summary of ``run_dir`` from its episode.json files (None if it has none)."""
    try:
        loaded = load_run(run_dir)
    except RunDirError:
        return None
    rows = [r for r in loaded.rows if isinstance(r.get("status"), str)]
    overall, ok_only = aggregate(rows), aggregate(rows, ok_only=True)
    header = rows[0] if rows else {}
    status = state.value if state.terminal and state is not RunState.ABORTED else "running"
    return {
        "run_id": loaded.run_id, "graph_name": loaded.graph_name, "dataset": loaded.dataset,
        "split": loaded.split, "worker_count": header.get("worker_count"),
        "status": status, "error": None,
        "episodes_total": None, "episodes_finished": len(rows),
        "counts_by_status": dict(Counter(r["status"] for r in rows)),
        "metrics": overall.means, "metrics_ci95": overall.ci95, "metrics_n": overall.n,
        "metrics_ok_only": ok_only.means, "metrics_ok_only_ci95": ok_only.ci95,
        "metrics_ok_only_n": ok_only.n,
        "error_count": sum(r["status"] in _FAILED for r in rows),
        "summary_unreadable": reason or "summary.json is unreadable",
        "episodes": rows,
    }
