"""``evaltui verify`` of a stopped run: the dealing order and the confidence sequence.

From spec.json (``order_seed``, the selection) and the dataset, the order the run dealt
is drawn again; the rows must be a prefix of it, and the betting confidence sequence over
the first ``stopped.n`` episodes' recomputed values (in that order, over a split of
``stopped.full_n``) must be the interval summary.json recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltui.contract.records import SPEC_FILENAME, SUMMARY_FILENAME
from evaltui.engine.graph.datasets import (
    DatasetError,
    load_episodes,
    resolve_dataset,
    select_episodes,
)
from evaltui.engine.stats.betting import betting_interval
from evaltui.engine.stats.order import dealing_order
from evaltui.engine.stats.stopwatch import ALPHA
from evaltui.rundir.jsonfiles import read_json

if TYPE_CHECKING:  # verify imports this module
    from evaltui.results.verify import VerifyReport

WHERE = f"{SUMMARY_FILENAME} stopped"


def dealt_order(spec: Mapping[str, Any]) -> list[int]:
    """The order a run with this spec dealt (DatasetError if its dataset is gone)."""
    ev = spec.get("eval") or {}
    path, _ = resolve_dataset(ev.get("dataset", "babyai"), ev.get("split"))
    episodes = load_episodes(path)
    selected = select_episodes(len(episodes), episodes, start=ev.get("start_episode_index", 0),
                               count=ev.get("episode_count"), indices=ev.get("episode_indices"),
                               selectors=ev.get("episode_selectors") or {})
    seed = ev.get("order_seed")
    order = dealing_order(selected, episodes, seed) if seed is not None else list(selected)
    cap = ev.get("max_episodes")
    return order[:cap] if cap else order


def check_stopped(report: VerifyReport, run_dir: Path, summary: Mapping[str, Any],
                  values: Mapping[int, Mapping[str, float]]) -> None:
    """Add to ``report`` what differs in the stopped run's order and interval; ``values``:
    each scored episode's recomputed metrics."""
    stopped = summary.get("stopped")
    if not isinstance(stopped, Mapping):
        return
    try:
        order = dealt_order(read_json(run_dir / SPEC_FILENAME))
    except (OSError, ValueError, DatasetError) as exc:
        report.note(WHERE, "order", "spec/dataset", str(exc), "the order the run dealt")
        return
    n, metric = int(stopped.get("n", 0)), str(stopped.get("metric"))
    rows = set(values)
    beyond = sorted(rows - set(order[: len(rows)]))
    if beyond:
        report.note(WHERE, "order", "prefix", beyond[:10], f"rows of the first {len(rows)} "
                    "episodes of the order")
    missing = [i for i in order[:n] if metric not in values.get(i, {})]
    if missing:
        report.note(WHERE, "n", "rows", f"no {metric} for {missing[:10]}",
                    f"{n} scored rows in order")
        return
    xs = [values[i][metric] for i in order[:n]]
    lo, hi = betting_interval(xs, ALPHA, population=int(stopped.get("full_n", len(order))))
    stored = stopped.get("interval") or [None, None]
    report.compare(WHERE, "interval", f"{metric} low", stored[0], round(lo, 6))
    report.compare(WHERE, "interval", f"{metric} high", stored[1], round(hi, 6))
