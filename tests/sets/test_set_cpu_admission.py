"""Issue 34: a set on a small machine runs no more members at once than its CPU cores
carry. Six members of two workers each, ``EVALTUI_CPUS=2``: the first reserves two cores
(one per worker: nothing measured yet) and so runs alone; the graph's measured CPU use
then sets what the others reserve. Sampled all along: the cores the ledger's live
reservations hold never exceed two, and every member finishes. ``--max-parallel`` caps
a set on top of that.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from test_set_run import set_json

from evaltui.cli import main
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root
from evaltui.scheduler import procs
from evaltui.scheduler.admission.ledger import Ledger


def live_runs(outputs: Path) -> list[str]:
    """Run dirs whose run process is alive now (not a zombie awaiting its reap)."""
    root = runs_root(outputs)
    live = []
    for run_dir in (root.iterdir() if root.is_dir() else ()):
        try:
            record = read_json(run_dir / "scheduler.json")
            pid = record.get("pid")
            if pid and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                live.append(run_dir.name)
        except (OSError, ValueError, psutil.Error):
            continue
    return live


def run_sampled(argv: list[str], outputs: Path) -> tuple[int, int, float]:
    """``main(argv)`` in a thread while sampling: (exit code, most live runs at once,
    most cores reserved in the ledger at once)."""
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(main(argv)))
    thread.start()
    most_live, most_cores = 0, 0.0
    while thread.is_alive():
        most_live = max(most_live, len(live_runs(outputs)))
        held = sum(r.cpus for r in Ledger().entries()
                   if procs.alive(r.holder_pid, r.holder_create_time))
        most_cores = max(most_cores, held)
        time.sleep(0.05)
    thread.join()
    return result[0], most_live, most_cores


def test_six_members_of_two_workers_never_reserve_more_than_two_cores(
        set_file: Callable[..., Path], outputs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_CPUS", "2")
    path = set_file({"name": "small-box", "base": {"graph": "noisy_bot", "dataset": "babyai",
                                                   "episodes": 3, "workers": 2},
                     "matrix": {"policy.noise": [0.0, 0.05, 0.1, 0.15, 0.2, 0.25]}})
    code, most_live, most_cores = run_sampled(["set", "run", str(path)], outputs)
    assert code == 0
    members = set_json(outputs, "small-box")["members"]
    assert len(members) == 6 and all(m["state"] == "done" for m in members)
    # All six at once before: 12 workers reserving 12 cores of 2.
    assert most_cores == pytest.approx(2.0)  # the first member, alone, and never more
    assert 1 <= most_live <= 6


def test_max_parallel_caps_a_set_on_top(set_file: Callable[..., Path], outputs: Path) -> None:
    path = set_file({"name": "capped", "base": {"graph": "bot", "dataset": "babyai",
                                                "episodes": 3},
                     "matrix": {"split": ["GoToLocal", "GoToObjMaze", "GoTo"]}})
    code, most_live, _ = run_sampled(["set", "run", str(path), "--max-parallel", "1"], outputs)
    assert code == 0 and most_live == 1
    assert all(m["state"] == "done" for m in set_json(outputs, "capped")["members"])
    assert main(["set", "run", str(path), "--max-parallel", "0"]) == 2
