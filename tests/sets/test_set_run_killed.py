"""``evaltui set run`` SIGKILLed at any moment, then run again: every member runs once.

The first ``set run`` is killed at several moments of its first seconds: as its first run
dir appears, at its second, and at a fixed time (the window where set.json did not
name the runs yet). The rerun finishes the set; then every member has exactly one run
(found by its spec's set id), each episode row once, and no run dir is left half-made.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from waiting import wait_until

from evaltui.contract.setspec import SET_FILENAME, SETS_DIRNAME
from evaltui.procs.groups import signal_group
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root

ROOT = Path(__file__).resolve().parents[2]
EPISODES = 2


def _run_dirs(outputs: Path) -> list[Path]:
    root = runs_root(outputs)
    return sorted(root.iterdir()) if root.is_dir() else []


def _set_runs(outputs: Path, set_id: str) -> list[Path]:
    found = []
    for run_dir in _run_dirs(outputs):
        try:
            spec = read_json(run_dir / "spec.json")
        except (OSError, ValueError):
            continue
        if (spec.get("scheduling") or {}).get("set_id") == set_id:
            found.append(run_dir)
    return found


MOMENTS: list[tuple[str, Callable[[Path, float], bool]]] = [
    ("first run dir", lambda outputs, _: len(_run_dirs(outputs)) >= 1),
    ("second run dir", lambda outputs, _: len(_run_dirs(outputs)) >= 2),
    ("0.8 s", lambda _, started: time.monotonic() - started >= 0.8),
]


@pytest.mark.parametrize("moment", [m[1] for m in MOMENTS], ids=[m[0] for m in MOMENTS])
def test_a_set_run_killed_at_any_moment_then_rerun_runs_every_member_once(
        moment: Callable[[Path, float], bool], set_file: Callable[..., Path],
        outputs: Path) -> None:
    path = set_file({"name": "killed", "base": {"graph": "bot", "episodes": EPISODES,
                                                "workers": 1},
                     "matrix": {"policy.noise": [0.0, 0.1, 0.2, 0.3]}})
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "evaltui.cli", "set", "run", str(path)],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: moment(outputs, started) or proc.poll() is not None, timeout=60,
                   what="the moment to kill set run")
    finally:
        if proc.poll() is None:
            signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
    rerun = subprocess.run([sys.executable, "-m", "evaltui.cli", "set", "run", str(path)],
                           env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]

    record = read_json(outputs / SETS_DIRNAME / "killed" / SET_FILENAME)
    members = record["members"]
    assert len(members) == 4 and all(m["state"] == "done" for m in members)
    runs = _set_runs(outputs, "killed")
    # One run per member, the one set.json names; no second run, no orphan.
    assert sorted(m["run_id"] for m in members) == sorted(d.name for d in runs)
    assert all((d / "scheduler.json").is_file() for d in _run_dirs(outputs)), \
        {d.name: sorted(p.name for p in d.iterdir()) for d in _run_dirs(outputs)}
    assert len(_run_dirs(outputs)) == 4
    for run_dir in runs:
        rows = [read_json(p) for p in run_dir.glob("episodes/ep*/episode.json")]
        assert sorted(r["episode_index"] for r in rows) == list(range(EPISODES))
        assert all(r["status"] == "ok" for r in rows)
