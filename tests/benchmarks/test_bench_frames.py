"""Frames benchmarks (issue 15 items 1-2): harness ratios with frames off and on, per-step
frame cost, and the replay viewer's time to load a step.

Run: ``pytest -m bench -s tests/benchmarks/test_bench_frames.py``. Numbers are printed
side by side from one run (the variants interleaved, medians); nothing asserts a time.
"""

from __future__ import annotations

import io
import json
import random
import resource
import statistics
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from harness_parts import SessionParts, first_episode_latency
from PIL import Image

from evaltui.procs.spawn import spawn_run
from evaltui.rundir.jsonfiles import read_json
from tests.runprep import prepare_run

GRAPHS = Path(__file__).resolve().parents[2] / "evaltui" / "graphs"
REPS = 3


def plain_loop(split: str, n: int, sim_latency_ms: float = 0.0) -> tuple[float, int]:
    """(seconds, steps) of the same env and bot with no engine: no logging, no frames.

    ``PLAIN_CPU`` gets the loop's CPU seconds."""
    from evaltui.benchmarks.babyai import SPLITS, load_manifest
    from evaltui.benchmarks.babyai.minigrid_import import BabyAIBot, make_env

    env = make_env(SPLITS[split])
    steps = 0
    c0, t0 = time.process_time(), time.perf_counter()
    for ep in load_manifest(split, n):
        with redirect_stdout(io.StringIO()):
            env.reset(seed=ep["seed"])
        bot = BabyAIBot(env.unwrapped)
        for _ in range(int(ep["max_steps"])):
            if sim_latency_ms:
                time.sleep(sim_latency_ms / 1000.0)
            _, _, term, trunc, _ = env.step(bot.replan())
            steps += 1
            if term or trunc:
                break
    PLAIN_CPU.append(time.process_time() - c0)
    return time.perf_counter() - t0, steps


PLAIN_CPU: list[float] = []


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(tmp_path: Path, split: str, n: int, **env: Any) -> dict[str, float]:
    """One run subprocess (K = 1) to the end: in-run elapsed, sum of episode times, steps,
    wall clock, and the CPU seconds of the run and its workers (robust to other load)."""
    graph = json.loads((GRAPHS / "bot.json").read_text())
    graph["nodesets"]["env"]["params"].update(env)
    spec = {"graph": graph, "eval": {"split": split, "episode_count": n, "worker_count": 1}}
    run_dir, _ = prepare_run(spec, tmp_path)
    c0, t0 = children_cpu(), time.perf_counter()
    spawn_run(run_dir).wait(timeout=900)
    wall, cpu = time.perf_counter() - t0, children_cpu() - c0
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "done", summary.get("error")
    rows = summary["episodes"]
    return {"in_run": summary["elapsed_sec"], "episodes": sum(r["elapsed_sec"] for r in rows),
            "steps": sum(r["step_count"] for r in rows), "wall": wall, "cpu": cpu,
            "first": first_episode_latency(run_dir)}


def medians(samples: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


@pytest.mark.bench
def test_harness_ratios_frames_off_and_on(tmp_path: Path) -> None:
    n = 200
    PLAIN_CPU.clear()
    plain: list[float] = []
    off: list[dict[str, float]] = []
    on: list[dict[str, float]] = []
    parts = SessionParts("GoToLocal", n)
    inproc: dict[str, list[float]] = {"bare": [], "score": [], "log": [], "full": []}
    for rep in range(REPS):  # interleaved, so load changes hit every variant alike
        plain.append(plain_loop("GoToLocal", n)[0])
        off.append(run(tmp_path / f"off{rep}", "GoToLocal", n, frame_stride=0))
        on.append(run(tmp_path / f"on{rep}", "GoToLocal", n, frame_stride=1))
        inproc["bare"].append(parts.seconds(log=False, score=False))
        inproc["score"].append(parts.seconds(log=False))
        inproc["log"].append(parts.seconds(score=False))
        inproc["full"].append(parts.seconds())
    p = statistics.median(plain)
    m_off, m_on = medians(off), medians(on)
    print(f"\nharness vs plain env+bot loop, {n} GoToLocal bot episodes, K = 1, "
          f"median of {REPS} interleaved")
    print(f"  plain loop (no engine)                 {p:7.3f} s")
    print("                                         frames off        frames on every step")
    for key, label in (("in_run", "in-run elapsed "), ("episodes", "sum of episodes"),
                       ("wall", "wall incl start")):
        print(f"  run subprocess, {label}        {m_off[key]:7.3f} s {m_off[key] / p:5.2f}"
              f"    {m_on[key]:7.3f} s {m_on[key] / p:5.2f}")
    cpu = statistics.median(PLAIN_CPU)
    print(f"  CPU: plain loop {cpu:.3f} s; run + worker processes {m_off['cpu']:.3f} s "
          f"{m_off['cpu'] / cpu:5.2f}    {m_on['cpu']:.3f} s {m_on['cpu'] / cpu:5.2f}")
    print("  targets: in-run elapsed ratio <= 1.15 (frames off), <= 1.5 (frames on)")
    print("  where the frames-off in-run time goes, over the plain loop (ms an episode, and "
          "ratio points):")
    q = {k: statistics.median(v) for k, v in inproc.items()}
    rows = [("the worker's episode body in-process, no log, no scoring", q["bare"] - p),
            ("+ scoring (metrics, trajectory record)", q["score"] - q["bare"]),
            ("+ the episode log (log.jsonl records, file, writes)", q["full"] - q["score"]),
            ("  (log without scoring, for reference)", q["log"] - q["bare"]),
            ("first episode: run clock start -> its first record",
             m_off["first"]),
            ("the rest: processes, pipes, results, between and after episodes",
             m_off["in_run"] - m_off["first"] - (q["full"] - p) - p)]
    for label, seconds in rows:
        print(f"    {label:66s} {seconds / n * 1e3:6.3f} ms  {seconds / p:+5.2f}")
    per_step = (m_on["episodes"] - m_off["episodes"]) / m_on["steps"] * 1e3
    print(f"  frames on - off: sum of episodes {per_step:.3f} ms a step, CPU "
          f"{(m_on['cpu'] - m_off['cpu']) / m_on['steps'] * 1e3:.3f} ms a step "
          f"({int(m_on['steps'])} steps)")


@pytest.mark.bench
def test_per_step_cost_goto_obj_maze(tmp_path: Path) -> None:
    n, latency = 10, 10.0
    PLAIN_CPU.clear()
    plain: list[float] = []
    off: list[dict[str, float]] = []
    on: list[dict[str, float]] = []
    steps = 0
    for rep in range(REPS):
        seconds, steps = plain_loop("GoToObjMaze", n, latency)
        plain.append(seconds)
        off.append(run(tmp_path / f"off{rep}", "GoToObjMaze", n, frame_stride=0,
                       sim_latency_ms=latency))
        on.append(run(tmp_path / f"on{rep}", "GoToObjMaze", n, frame_stride=1,
                      sim_latency_ms=latency))
    p = statistics.median(plain)
    m_off, m_on = medians(off), medians(on)
    assert m_on["steps"] == m_off["steps"] == steps
    print(f"\nper-step cost over the plain loop, {n} GoToObjMaze bot episodes ({steps} steps), "
          f"sim_latency_ms={latency:g}, median of {REPS}")
    print(f"  plain loop                       {p / steps * 1e3:7.3f} ms a step")
    for label, m in (("frames off", m_off), ("frames on every step", m_on)):
        over = (m["episodes"] - p) / steps * 1e3
        print(f"  run, {label:22s}      {m['episodes'] / steps * 1e3:7.3f} ms a step  "
              f"(+{over:.3f} ms)")
    cpu = statistics.median(PLAIN_CPU) / steps * 1e3
    print(f"  CPU a step: plain loop {cpu:.3f} ms; run + workers, frames off "
          f"{m_off['cpu'] / steps * 1e3:.3f} ms (+{m_off['cpu'] / steps * 1e3 - cpu:.3f}), "
          f"frames on {m_on['cpu'] / steps * 1e3:.3f} ms (+{m_on['cpu'] / steps * 1e3 - cpu:.3f})"
          " (the run's fixed start-up CPU included)")
    print("  target: <= 0.5 ms a step over the plain loop with frames on")


def goto_obj_maze_states(episodes: int) -> list[Any]:
    """Deep copies of the unwrapped env at every step of a few GoToObjMaze bot episodes."""
    import copy

    from evaltui.benchmarks.babyai import load_manifest
    from evaltui.benchmarks.babyai.minigrid_import import BabyAIBot, make_env

    env = make_env("BabyAI-GoToObjMaze-v0")
    states = []
    for ep in load_manifest("GoToObjMaze", episodes):
        with redirect_stdout(io.StringIO()):
            env.reset(seed=ep["seed"])
        bot = BabyAIBot(env.unwrapped)
        for _ in range(int(ep["max_steps"])):
            _, _, term, trunc, _ = env.step(bot.replan())
            states.append(copy.deepcopy(env.unwrapped))
            if term or trunc:
                break
    return states


@pytest.mark.bench
def test_frame_cost_per_step_before_and_after(tmp_path: Path) -> None:
    from evaltui.benchmarks.babyai import load_manifest
    from evaltui.benchmarks.babyai.frames import GridFrames
    from evaltui.benchmarks.babyai.minigrid_import import BabyAIBot, make_env
    from evaltui.rundir.framefile import FrameFileWriter

    env = make_env("BabyAI-GoToObjMaze-v0")
    frames = GridFrames(8)
    timings: dict[str, float] = {"before": 0.0, "render": 0.0, "after": 0.0, "pixels": 0.0}
    steps = 0
    for rep in range(2):  # the first pass renders every tile once, as a worker's first episodes
        (tmp_path / f"ep{rep}").mkdir()
        writer = FrameFileWriter(tmp_path / f"ep{rep}")
        for ep in load_manifest("GoToObjMaze", 8):
            with redirect_stdout(io.StringIO()):
                env.reset(seed=ep["seed"])
            sim = env.unwrapped
            bot = BabyAIBot(sim)
            for _ in range(int(ep["max_steps"])):
                _, _, term, trunc, _ = env.step(bot.replan())
                t0 = time.perf_counter()
                pixels = sim.get_frame(highlight=False, tile_size=8)
                t1 = time.perf_counter()
                Image.fromarray(pixels).save(tmp_path / f"{steps}.png", compress_level=1)
                t2 = time.perf_counter()
                frame = frames.frame(sim)
                writer.write(frame)
                t3 = time.perf_counter()
                _ = frame.pixels
                t4 = time.perf_counter()
                if rep:
                    steps += 1
                    timings["before"] += t2 - t0
                    timings["render"] += t1 - t0
                    timings["after"] += t3 - t2
                    timings["pixels"] += t4 - t3
                if term or trunc:
                    break
        writer.close()
    env.close()
    ms = {k: v / steps * 1e3 for k, v in timings.items()}
    size = (tmp_path / "ep1" / "frames.bin").stat().st_size / steps
    png = sum((tmp_path / f"{i}.png").stat().st_size for i in range(steps)) / steps
    print(f"\nframe cost a step, GoToObjMaze (22x22 cells) at tile_size 8, {steps} bot steps")
    print(f"  before: get_frame + PNG file          {ms['before']:6.3f} ms  ({png:,.0f} B a "
          f"frame; get_frame alone {ms['render']:.3f} ms)")
    print(f"  after:  tile ids + frames.bin append  {ms['after']:6.3f} ms  ({size:,.0f} B a "
          f"frame; pixels, only if a node reads them, {ms['pixels']:.3f} ms)")


@pytest.mark.bench
def test_replay_loads_any_step_fast() -> None:
    from evaltui.benchmarks.babyai.frames import GridFrames
    from evaltui.engine.episode.logger import ExecutionLogger
    from evaltui.runview.replay import EpisodeReplay

    states = goto_obj_maze_states(3)
    frames = GridFrames(8)
    steps = 5000
    with tempfile.TemporaryDirectory() as tmp:
        ep = Path(tmp) / "ep0000"
        obs = {"image": np.zeros((7, 7, 3), np.uint8), "direction": 1, "mission": "go to"}
        with ExecutionLogger(ep) as logger:
            logger.record("episode_start", step=0, outputs={"frame": frames.frame(states[0])})
            for step in range(1, steps + 1):
                logger.record("fire", step=step, node="policy", nodeset="policy",
                              inputs={"sim": object()}, outputs={"action": 2})
                logger.record("fire", step=step, node="env_step", nodeset="env",
                              inputs={"action": 2}, outputs={
                                  "obs": obs, "done": False,
                                  "frame": frames.frame(states[step % len(states)])})
                logger.flush()
        t0 = time.perf_counter()
        replay = EpisodeReplay(ep)
        replay.index.scan()
        first = replay.frame_of(0)
        assert first is not None
        first.pixels()
        cold = time.perf_counter() - t0
        rng = random.Random(0)
        times = []
        for step in (rng.randrange(steps + 1) for _ in range(200)):
            t0 = time.perf_counter()
            firings, _ = replay.firings(step)
            ref = replay.frame_of(step)
            assert ref is not None and ref.step == step
            ref.image()
            times.append(time.perf_counter() - t0)
        size = (ep / "frames.bin").stat().st_size
    print(f"\nreplay of a {steps}-step GoToObjMaze episode (frames every step, "
          f"{size / 1e6:.1f} MB of frames.bin)")
    print(f"  open + index the log + first frame: {cold * 1e3:.1f} ms")
    print(f"  any step (records + frame as an image), 200 random: p50 "
          f"{statistics.median(times) * 1e3:.2f} ms, max {max(times) * 1e3:.2f} ms "
          f"(target < 50 ms)")
