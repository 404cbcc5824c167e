"""``resume --more``: a run stopped by its rule deals on in its recorded order, and its
confidence sequence over the longer prefix is still the betting CS of those rows."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from evaltui.contract.states import RunState
from evaltui.engine.episode.metrics import row_values
from evaltui.engine.stats.betting import betting_interval
from evaltui.graphs import builtin_graph_path
from evaltui.results.verifystop import dealt_order
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.core import NotResumable
from evaltui.scheduler.scheduler import JobScheduler

SPLIT = 60


def _rows(run_dir: Path) -> dict[int, dict]:
    return {r["episode_index"]: r for r in
            (read_json(p) for p in run_dir.glob("episodes/ep*/episode.json"))}


def _check_prefix(run_dir: Path) -> dict:
    stopped = read_json(run_dir / "summary.json")["stopped"]
    order = dealt_order(read_json(run_dir / "spec.json"))
    rows = _rows(run_dir)
    assert sorted(rows) == sorted(order[: len(rows)]) and stopped["n"] == len(rows)
    xs = [row_values(rows[i])["success"] for i in order[: stopped["n"]]]
    assert stopped["interval"] == [round(v, 6) for v in
                                   betting_interval(xs, population=SPLIT)]
    return stopped


def test_resume_more_continues_a_stopped_run_in_its_order(
        make_scheduler: Callable[..., JobScheduler], tmp_path: Path) -> None:
    sched = make_scheduler().start()
    graph = json.loads(builtin_graph_path("bot").read_text())
    run_id, _ = sched.submit({"graph": graph, "eval": {
        "dataset": "babyai", "split": "GoToLocal", "episode_count": SPLIT,
        "stop_when": "success:width<=0.6", "worker_count": 2},
        "active_workspace_dir": str(tmp_path)})
    assert sched.wait(run_id, timeout=120) is RunState.DONE
    run_dir = runs_root(sched.outputs) / run_id
    first = _check_prefix(run_dir)
    assert first["n"] < SPLIT
    sched.resume(run_id, more=5)
    assert sched.wait(run_id, timeout=120) is RunState.DONE
    second = _check_prefix(run_dir)
    assert second["n"] == first["n"] + 5 and second["met_at"] == first["met_at"]
    lo1, hi1 = first["interval"]
    lo2, hi2 = second["interval"]
    assert lo2 >= lo1 and hi2 <= hi1  # a running intersection: never wider
    sched.resume(run_id, more=0)  # to the end: the CS closes to the split's exact mean
    assert sched.wait(run_id, timeout=180) is RunState.DONE
    last = _check_prefix(run_dir)
    mean = read_json(run_dir / "summary.json")["metrics"]["success"]
    assert last["n"] == SPLIT and last["interval"] == [round(mean, 6)] * 2
    with pytest.raises(NotResumable, match="whole split"):
        sched.resume(run_id, more=0)
