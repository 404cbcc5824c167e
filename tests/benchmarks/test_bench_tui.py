"""TUI benchmarks: a fast run on the run screen, and the replay of a very long log.

Run: ``pytest -m bench -s tests/benchmarks/test_bench_tui.py``. Each prints its numbers
and checks them against the issue's targets:

- 2,000 episodes written at 100/s while the run screen is shown: the TUI's CPU (% of
  one core), its RSS, and the lag from an episode.json landing to its row being on
  screen (p50/p95). Targets: CPU <= 25%, RSS <= 250 MB, p95 lag <= 1 s.
- A 200,000-line log.jsonl: time to the first replay screen (< 1 s) and the RSS growth
  while the whole log is indexed (< 50 MB).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.tui.app import make_app
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.widgets.episodes_table import EpisodesTable

HERE = Path(__file__).resolve().parent
SIZE = (120, 36)
EPISODES, RATE = 2000, 100.0
LOG_STEPS = 100_000  # two firings a step: 200,000 lines


def run_screen_with_writer(run_dir: Path) -> dict[str, Any]:
    """Show the run screen while a subprocess writes the run; measure this process."""
    me = psutil.Process()
    seen: dict[int, float] = {}
    original = EpisodesTable.upsert

    def upsert(self: EpisodesTable, rows: Any) -> None:
        rows = list(rows)
        original(self, rows)
        fresh = [r["episode_index"] for r in rows if r["episode_index"] not in seen]

        def visible() -> None:  # after the frame that draws them
            now = time.time()
            for index in fresh:
                seen.setdefault(index, now)
        self.call_after_refresh(visible)

    EpisodesTable.upsert = upsert  # type: ignore[method-assign]
    rss: list[int] = []

    async def drive() -> float:
        app = make_app(run_dir=run_dir)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(0.5)
            cpu0, t0 = me.cpu_times(), time.monotonic()
            writer = subprocess.Popen([sys.executable, str(HERE / "synthetic_run.py"),
                                       str(run_dir), str(EPISODES), str(RATE)])
            while writer.poll() is None or len(seen) < EPISODES:
                await asyncio.sleep(0.25)
                rss.append(me.memory_info().rss)
                if time.monotonic() - t0 > EPISODES / RATE + 30:
                    break
            cpu1, t1 = me.cpu_times(), time.monotonic()
            writer.wait()
            busy = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
            return 100 * busy / (t1 - t0)

    try:
        cpu_pct = asyncio.run(drive())
    finally:
        EpisodesTable.upsert = original  # type: ignore[method-assign]
    written = {}
    for ep in sorted((run_dir / "episodes").iterdir()):
        row = json.loads((ep / "episode.json").read_bytes())
        written[row["episode_index"]] = row["written_at"]
    lags = sorted(seen[i] - written[i] for i in written if i in seen)
    return {"cpu_pct": cpu_pct, "rss_mb": max(rss) / 2**20, "rows": len(seen),
            "lag_p50": statistics.median(lags), "lag_p95": lags[int(0.95 * len(lags)) - 1],
            "lag_max": lags[-1]}


@pytest.mark.bench
def test_run_screen_follows_a_fast_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "eval_runs" / "20260101_120000"
    run_dir.mkdir(parents=True)
    write_json_atomic(run_dir / "scheduler.json", {"state": "running"})
    r = run_screen_with_writer(run_dir)
    print(f"\nrun screen, {EPISODES} episodes at {RATE:.0f}/s: rows {r['rows']}, "
          f"TUI CPU {r['cpu_pct']:.1f}% of a core, RSS {r['rss_mb']:.0f} MB, "
          f"lag p50 {r['lag_p50'] * 1000:.0f} ms, p95 {r['lag_p95'] * 1000:.0f} ms, "
          f"max {r['lag_max'] * 1000:.0f} ms")
    assert r["rows"] == EPISODES
    assert r["cpu_pct"] <= 25
    assert r["rss_mb"] <= 250
    assert r["lag_p95"] <= 1.0


def write_long_log(path: Path, steps: int) -> int:
    """A realistic log: each step a policy and an env_step firing, every 997th an error."""
    policy = ('{{"t":{t},"step":{s},"node":"policy","nodeset":"policy","event":"fire",'
              '"dur_ms":0.41,"inputs":{{"sim":{{"$object":"minigrid.envs.babyai.goto.GoTo"}}}},'
              '"outputs":{{"action":{a}}},"error":null}}\n')
    env = ('{{"t":{t},"step":{s},"node":"env_step","nodeset":"env","event":"{ev}",'
           '"dur_ms":0.9,"inputs":{{"action":{a}}},"outputs":{{"obs":{{"image":{{"$array":'
           '{{"shape":[7,7,3],"dtype":"uint8","min":0,"max":7}}}},"direction":{a},'
           '"mission":"go to the grey key"}},"frame":{{"$frame":"assets/step{s:05d}.png",'
           '"shape":[64,64,3]}},"done":false,"reward":0.0}},"error":{err}}}\n')
    with open(path, "w") as fh:
        for s in range(1, steps + 1):
            t = 1768467600 + s * 0.01
            fh.write(policy.format(t=t, s=s, a=s % 3))
            bad = s % 997 == 0
            fh.write(env.format(t=t, s=s, a=s % 3, ev="error" if bad else "fire",
                                err='"ValueError: boom"' if bad else "null"))
    return path.stat().st_size


@pytest.mark.bench
def test_replay_of_a_200k_line_log(tmp_path: Path) -> None:
    small = tmp_path / "warm" / "ep0000"
    small.mkdir(parents=True)
    write_long_log(small / "log.jsonl", 10)
    big = tmp_path / "big" / "ep0000"
    big.mkdir(parents=True)
    size = write_long_log(big / "log.jsonl", LOG_STEPS)
    me = psutil.Process()

    async def replay(ep: Path, steps: int) -> tuple[float, float, int]:
        t0 = time.perf_counter()
        app = make_app(replay_dir=ep)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, ReplayScreen)
            while not screen.firings:
                await asyncio.sleep(0.005)
            first = time.perf_counter() - t0
            peak = me.memory_info().rss
            while not screen.replay.index.complete or screen.last_step < steps:
                await asyncio.sleep(0.01)
                peak = max(peak, me.memory_info().rss)
            indexed = time.perf_counter() - t0
            await pilot.press("end")
            while screen.step != screen.last_step or not screen.firings:
                await asyncio.sleep(0.01)
            if screen.error_steps:
                await pilot.press("e")  # wraps to the first error step
                while not screen.firings or not any(f.is_error for f in screen.firings):
                    await asyncio.sleep(0.01)
            peak = max(peak, me.memory_info().rss)
            return first, indexed, peak

    asyncio.run(replay(small, 10))  # imports, first app: not part of the measure
    baseline = me.memory_info().rss
    first, indexed, peak = asyncio.run(replay(big, LOG_STEPS))
    growth = (peak - baseline) / 2**20
    print(f"\nreplay of {2 * LOG_STEPS} lines ({size / 2**20:.0f} MB): first screen "
          f"{first * 1000:.0f} ms, fully indexed {indexed * 1000:.0f} ms, RSS growth "
          f"{growth:.1f} MB")
    assert first < 1.0
    assert growth < 50
