"""Ray executor vs the local pool (issue 11). Run: ``pytest -m bench -s
tests/benchmarks/test_bench_ray.py``; numbers go to docs/performance.md ("Ray").

48 GoToObjMaze bot episodes at ``sim_latency_ms=10``, K = 4: whole-command wall (spawn to
exit) of the run on the two-node local cluster (tests/ray/raycluster.py; the cluster's
start is not counted) against the local pool, alternating, twice each; and the per-step
cost of the Ray path: the mean episode ``elapsed_sec`` per step, Ray minus local.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from evaltui.procs.spawn import spawn_run
from evaltui.rundir.jsonfiles import read_json
from tests.runprep import prepare_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ray"))
GRAPHS = Path(__file__).resolve().parents[2] / "evaltui" / "graphs"

pytestmark = pytest.mark.bench


def run(tmp_path: Path, name: str, **ev: Any) -> dict[str, float]:
    graph = json.loads((GRAPHS / "bot.json").read_text())
    graph["nodesets"]["env"]["params"]["sim_latency_ms"] = 10
    spec = {"graph": graph, "eval": {"split": "GoToObjMaze", "episode_count": 48,
                                     "worker_count": 4, **ev}}
    run_dir, _ = prepare_run(spec, tmp_path / name)
    t0 = time.perf_counter()
    proc = spawn_run(run_dir)
    proc.wait(timeout=600)
    wall = time.perf_counter() - t0
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "done", summary.get("error")
    rows = summary["episodes"]
    steps = sum(r["step_count"] for r in rows)
    return {"wall": wall, "per_step_ms": 1e3 * sum(r["elapsed_sec"] for r in rows) / steps}


def test_ray_vs_local_pool_whole_run(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from raycluster import two_node_cluster

    with two_node_cluster() as cluster:
        local, ray = [], []
        for i in range(2):
            local.append(run(tmp_path, f"local{i}"))
            ray.append(run(tmp_path, f"ray{i}", executor="ray", ray_address=cluster.address))
    wl = statistics.median(r["wall"] for r in local)
    wr = statistics.median(r["wall"] for r in ray)
    sl = statistics.median(r["per_step_ms"] for r in local)
    sr = statistics.median(r["per_step_ms"] for r in ray)
    print(f"\n48 GoToObjMaze eps, sim 10 ms, K=4: local walls "
          f"{[round(r['wall'], 2) for r in local]} s, ray walls "
          f"{[round(r['wall'], 2) for r in ray]} s, ratio {wr / wl:.2f}x (target <= 1.15)")
    print(f"per step: local {sl:.2f} ms, ray {sr:.2f} ms, overhead {sr - sl:+.2f} ms")
