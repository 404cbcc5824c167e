"""Early stopping (``--stop-when``): episodes saved, and what the CS costs per episode.

Run: ``pytest -m bench -s tests/benchmarks/test_bench_early_stop.py``. Numbers are
printed side by side from one run (docs/performance.md); nothing here asserts a time.

1. Episodes used vs the full split to reach the same decision: the built-in ``bot`` and
   ``noisy_bot`` on 200 BabyAI GoToLocal episodes, each run once in full and once with a
   stop rule; the decision at the stop is compared with the full split's exact answer.
2. The CS update per episode at 5,000 episodes (µs), beside what the summary writer
   spends per row and a bot episode's own time.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from evaltui.engine.run.summary import row_json
from evaltui.engine.stats.betting import BettingCS
from evaltui.rundir.jsonfiles import read_json
from tests.engine.runhelpers import run_to_end

GRAPHS = Path(__file__).resolve().parents[2] / "evaltui" / "graphs"
SPLIT = 200
RULES = ("success>=0.8", "success:width<=0.2")


def _spec(graph: str, **ev: object) -> dict:
    return {"graph": json.loads((GRAPHS / f"{graph}.json").read_text()),
            "eval": {"dataset": "babyai", "split": "GoToLocal", "episode_count": SPLIT,
                     "worker_count": 2, **ev}}


def _answer(rule: str, mean: float) -> str:
    return ("yes" if mean >= 0.8 else "no") if rule.startswith("success>=") else "-"


@pytest.mark.bench
def test_episodes_used_vs_the_full_split(tmp_path: Path) -> None:
    print(f"\n{'graph':10} {'rule':20} {'full mean':>9} {'stop n':>7} {'of':>4} {'saved':>6} "
          f"{'CS at stop':>16} {'decision':>22} {'= full':>6}")
    for graph in ("bot", "noisy_bot"):
        full = read_json(run_to_end(_spec(graph), tmp_path / f"{graph}-full", timeout=600)
                         / "summary.json")
        mean = full["metrics"]["success"]
        for rule in RULES:
            out = tmp_path / f"{graph}-{rule.replace(':', '_').replace('<', 'l')}"
            stopped = read_json(run_to_end(_spec(graph, stop_when=rule, order_seed=1), out,
                                           timeout=600) / "summary.json")["stopped"]
            n = stopped["n"] if stopped else SPLIT
            lo, hi = stopped["interval"] if stopped else (mean, mean)
            decision = (stopped or {}).get("decision") or "-"
            same = "-" if decision == "-" else str(decision.endswith(_answer(rule, mean)))
            print(f"{graph:10} {rule:20} {mean:9.3f} {n:7d} {SPLIT:4d} {1 - n / SPLIT:6.0%} "
                  f"[{lo:.3f}, {hi:.3f}] {decision:>22} {same:>6}")


@pytest.mark.bench
def test_cs_update_cost_per_episode_at_5000() -> None:
    rng = np.random.default_rng(0)
    xs = (rng.random(5000) < 0.7).astype(float)
    timings, walls = {}, {}  # CPU time (the machine may be shared), wall time
    for label, population in (("with replacement", None), ("without, N=5000", 5000)):
        cs = BettingCS(0.05, population)
        t0, c0 = time.perf_counter(), time.process_time()
        for x in xs:
            cs.update(float(x))
        timings[label] = (time.process_time() - c0) / len(xs) * 1e6
        walls[label] = (time.perf_counter() - t0) / len(xs) * 1e6
    row = {"episode_index": 0, "episode_id": "e", "scene_id": "s", "instruction": "go",
           "metrics": {"success": 1.0, "spl": 0.9}, "step_count": 7, "elapsed_sec": 0.05,
           "status": "ok", "error": None, "worker_id": 0, "attempts": 1,
           "finished_at": "2026-01-01T00:00:00", "run_id": "r", "graph_name": "g",
           "dataset": "babyai", "split": "GoToLocal", "worker_count": 1, "nodes": []}
    c0 = time.process_time()
    for i in range(5000):
        row_json({**row, "episode_index": i})
    per_row = (time.process_time() - c0) / 5000 * 1e6
    wr, wor = timings["with replacement"], timings["without, N=5000"]
    print(f"\nCS update per episode at 5,000 (CPU µs): with replacement {wr:.1f}, without "
          f"(N=5000) {wor:.1f} (wall {walls['with replacement']:.1f} / "
          f"{walls['without, N=5000']:.1f}); the summary writer's row validation alone "
          f"{per_row:.1f} µs/row: CS/row = {wor / per_row:.1f}x")
