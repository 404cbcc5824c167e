"""Engine benchmarks (issue: headless engine): harness overhead and log writer cost.

Run: ``pytest -m bench -s tests/benchmarks/test_bench_engine.py``. Numbers are printed
side by side from one run; nothing here asserts a time.
"""

from __future__ import annotations

import io
import json
import statistics
import time
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from evaltui.engine.episode.logger import ExecutionLogger
from evaltui.procs.spawn import spawn_run
from evaltui.rundir.jsonfiles import read_json, write_json_atomic
from evaltui.rundir.layout import episode_dir
from tests.runprep import prepare_run

GRAPHS = Path(__file__).resolve().parents[2] / "evaltui" / "graphs"
EPISODES = 200


def plain_loop(n: int) -> float:
    """The same env and bot with no engine: no logging, no frames, no metrics."""
    from evaltui.benchmarks.babyai import manifest_path
    from evaltui.benchmarks.babyai.minigrid_import import BabyAIBot, make_env

    episodes = [json.loads(line) for line in manifest_path("GoToLocal").read_text().splitlines()]
    env = make_env("BabyAI-GoToLocal-v0")
    t0 = time.perf_counter()
    for ep in episodes[:n]:
        with redirect_stdout(io.StringIO()):
            env.reset(seed=ep["seed"])
        bot = BabyAIBot(env.unwrapped)
        for _ in range(200):
            _, _, term, trunc, _ = env.step(bot.replan())
            if term or trunc:
                break
    return time.perf_counter() - t0


def run_subprocess(spec: dict, outputs: Path) -> tuple[float, float, float]:
    """(sum of episode times, in-run elapsed, wall clock incl. interpreter start)."""
    run_dir, _ = prepare_run(spec, outputs)
    t0 = time.perf_counter()
    proc = spawn_run(run_dir)
    proc.wait(timeout=600)
    wall = time.perf_counter() - t0
    summary = read_json(run_dir / "summary.json")
    return sum(r["elapsed_sec"] for r in summary["episodes"]), summary["elapsed_sec"], wall


@pytest.mark.bench
def test_harness_overhead(tmp_path: Path) -> None:
    graph = json.loads((GRAPHS / "bot.json").read_text())
    graph["nodesets"]["env"]["params"]["frame_stride"] = 0
    spec = {"graph": graph, "eval": {"split": "GoToLocal", "episode_count": EPISODES}}
    plain, runs = [], []
    for _ in range(3):  # interleaved, so load changes hit both sides alike
        plain.append(plain_loop(EPISODES))
        runs.append(run_subprocess(spec, tmp_path))
    p = statistics.median(plain)
    episodes, in_run, wall = (statistics.median(r[i] for r in runs) for i in range(3))
    print(f"\nharness overhead, {EPISODES} GoToLocal bot episodes, frames off, "
          f"median of 3 interleaved")
    print(f"  plain loop (no engine)          {p:7.3f} s")
    for label, value in (("episodes only  ", episodes), ("in-run elapsed ", in_run),
                         ("wall incl start", wall)):
        print(f"  run subprocess, {label} {value:7.3f} s  ratio {value / p:.3f}")


@pytest.mark.bench
def test_log_writer_throughput_and_episode_fixed_cost(tmp_path: Path) -> None:
    obs = {"image": np.zeros((7, 7, 3), np.uint8), "direction": 1, "mission": "go to the red ball"}
    n = 50_000
    with ExecutionLogger(tmp_path / "w") as logger:
        t0 = time.perf_counter()
        for i in range(n):
            logger.record("fire", step=i, node="env_step", nodeset="env", dur_ms=0.5,
                          inputs={"action": 2}, outputs={"obs": obs, "done": False})
            if i % 2:
                logger.flush()
        dt = time.perf_counter() - t0
    row = {"episode_index": 0, "metrics": {"success": 1.0}, "status": "ok"}
    m = 200
    t0 = time.perf_counter()
    for i in range(m):
        ep = episode_dir(tmp_path / "run", i)
        with ExecutionLogger(ep) as logger:
            logger.record("episode_start", step=0)
            logger.record("episode_end", step=0)
        write_json_atomic(ep / "episode.json", row)
    fixed = (time.perf_counter() - t0) / m
    print(f"\nlog writer: {n / dt:,.0f} records/s ({dt / n * 1e6:.1f} us/record, "
          f"flush every 2 records)")
    print(f"per-episode fixed cost (dir, log open/close, atomic episode.json with fsync): "
          f"{fixed * 1e3:.2f} ms")
