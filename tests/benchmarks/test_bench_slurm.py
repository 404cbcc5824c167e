"""Slurm executor vs the local pool (issue 23). Run: ``pytest -m "bench and slurm" -s
tests/benchmarks/test_bench_slurm.py``; numbers go to docs/performance.md ("Slurm").

On the tests' private two-node cluster (tests/slurm/slurmcluster.py: both nodes on this
machine, idle; its start is not counted):

- submit -> first episode running: from the start of ``evaltui eval --executor slurm``
  (the login node's command: spec check, run dir, sbatch) to the first episode's
  ``set_episode`` in a worker step (the walk env's trace file carries its
  ``CLOCK_MONOTONIC``, the same clock on one host), p50 over 5 submits, and the same for
  a local ``evaltui eval`` beside it;
- the whole run: 20 BabyAI GoToLocal bot episodes, 2 workers, ``evaltui eval`` to its exit,
  Slurm vs the local pool, alternating, 2 each.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from evaltui.rundir.jsonfiles import read_json

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "slurm"))

pytestmark = [pytest.mark.bench, pytest.mark.slurm]


@pytest.fixture
def cluster_env(slurm_session: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The environment of a login-node command of the session cluster."""
    for key in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SLURM_CONF", str(slurm_session.conf))
    yield {**os.environ, "EVALTUI_SLURM_LISTEN_HOST": "127.0.0.1"}


def evaltui_eval(tmp_path: Path, env: dict[str, str], *args: str) -> tuple[float, str]:
    """Run ``evaltui eval --json`` to its end: its wall time and its run dir."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "evaltui.cli", "eval", "--outputs",
                           str(tmp_path / "out"), "--json", *args], capture_output=True,
                          text=True, timeout=600, env=env, cwd=tmp_path)
    wall = time.perf_counter() - t0
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout)
    assert answer["state"] == "done", answer
    return wall, str(tmp_path / "out" / "eval_runs" / answer["run_id"])


def to_first_episode(tmp_path: Path, env: dict[str, str], name: str, *args: str) -> float:
    """Seconds from the start of ``evaltui eval`` to its first episode's set_episode."""
    import json

    from pool_helpers import walk_graph, write_dataset
    from runhelpers import ENGINE_TESTS

    trace = tmp_path / name
    trace.mkdir()
    job = tmp_path / f"{name}.json"
    job.write_text(json.dumps({
        "graph": walk_graph({"trace_dir": str(trace)}),
        "active_workspace_dir": str(ENGINE_TESTS),
        "eval": {"dataset": str(write_dataset(tmp_path / f"{name}.jsonl", [2])),
                 "worker_count": 1}}))
    t0, wall0 = time.monotonic_ns(), time.time()
    _, run_dir = evaltui_eval(tmp_path, env, str(job), *args)
    first = min(int(p.name.split(".")[3]) for p in trace.glob("start.*"))
    started = datetime.fromisoformat(read_json(Path(run_dir) / "summary.json")["started_at"])
    return started.timestamp() - wall0, (first - t0) / 1e9


def test_slurm_submit_to_first_episode_and_whole_run_vs_local(
        tmp_path: Path, cluster_env: dict[str, str]) -> None:
    slurm_times = [to_first_episode(tmp_path, cluster_env, f"s{i}", "--executor", "slurm")
                   for i in range(5)]
    local_times = [to_first_episode(tmp_path, cluster_env, f"l{i}") for i in range(5)]
    slurm_first, local_first = [t[1] for t in slurm_times], [t[1] for t in local_times]
    bot = ["bot", "--dataset", "babyai", "--split", "GoToLocal", "--episodes", "20",
           "--workers", "2"]
    local, slurm = [], []
    for _ in range(2):
        local.append(evaltui_eval(tmp_path, cluster_env, *bot)[0])
        slurm.append(evaltui_eval(tmp_path, cluster_env, *bot, "--executor", "slurm")[0])
    print("\nsubmit -> first episode running (evaltui eval's start to the first "
          "set_episode), p50 of 5:")
    print(f"  slurm {statistics.median(slurm_first):.2f} s "
          f"{[round(s, 2) for s in slurm_first]}   local "
          f"{statistics.median(local_first):.2f} s {[round(s, 2) for s in local_first]}")
    print(f"  of which to the run's start: slurm "
          f"{statistics.median(t[0] for t in slurm_times):.2f} s   local "
          f"{statistics.median(t[0] for t in local_times):.2f} s")
    wl, ws = statistics.median(local), statistics.median(slurm)
    print("whole run, 20 GoToLocal bot episodes, 2 workers (evaltui eval to exit):")
    print(f"  local {wl:.2f} s {[round(w, 2) for w in local]}   slurm {ws:.2f} s "
          f"{[round(w, 2) for w in slurm]}   ratio {ws / wl:.2f}x")
