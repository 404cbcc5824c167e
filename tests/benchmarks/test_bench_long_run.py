"""Issue 34: a long run keeps its rate. Episodes per second over each successive 1,000 of
one GoToLocal run (bot, K=2, frames default), and the run process's peak RSS.

Run: ``pytest -m bench -s tests/benchmarks/test_bench_long_run.py`` (the 5,000-episode
run takes a minute or two; ``-k 50000`` the 50,000 one, ~5 minutes on an idle 2-core
box). Before the change summary.json was rewritten whole, every row, about once a second:
20,000 episodes went from 249/s over the first 1,000 to ~115/s (docs/performance.md).
Nothing here asserts a time: the ratio last/first is printed.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from evaltui.benchmarks.babyai import manifest_path
from evaltui.procs.spawn import spawn_run
from evaltui.rundir.jsonfiles import read_json
from tests.runprep import prepare_run

GRAPHS = Path(__file__).resolve().parents[2] / "evaltui" / "graphs"
WINDOW = 1000


def long_split(path: Path, count: int) -> Path:
    """A GoToLocal manifest of ``count`` episodes: the 500 of the split over and over,
    each with an id of its own."""
    base = [json.loads(line) for line in manifest_path("GoToLocal").read_text().splitlines()]
    with path.open("w") as f:
        for i in range(count):
            ep = dict(base[i % len(base)])
            ep["episode_id"] = f"GoToLocal-long-{i:06d}"
            f.write(json.dumps(ep) + "\n")
    return path


def run_and_watch(spec: dict, outputs: Path) -> tuple[Path, float, float]:
    """The run dir, the run process's peak RSS (MiB, sampled every 0.2 s) and wall time."""
    run_dir, _ = prepare_run(spec, outputs)
    t0 = time.perf_counter()
    proc = spawn_run(run_dir)
    peak = 0.0
    watched = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss / 2**20)
        except psutil.Error:
            break
        time.sleep(0.2)
    proc.wait(timeout=3600)
    return run_dir, peak, time.perf_counter() - t0


def rates(rows: list[dict]) -> list[float]:
    """Episodes per second over each successive WINDOW episodes, by their finish times."""
    ends = sorted(datetime.fromisoformat(r["finished_at"]).timestamp() for r in rows)
    out = []
    for start in range(0, len(ends) - WINDOW + 1, WINDOW):
        before = ends[start - 1] if start else ends[0]
        span = ends[start + WINDOW - 1] - before
        out.append((WINDOW - (0 if start else 1)) / span)
    return out


@pytest.mark.bench
@pytest.mark.parametrize("count", [5000, 50000])
def test_long_run_keeps_its_rate(tmp_path: Path, count: int) -> None:
    graph = json.loads((GRAPHS / "bot.json").read_text())
    dataset = long_split(tmp_path / "GoToLocalLong.jsonl", count)
    spec = {"graph": graph, "eval": {"dataset": str(dataset), "worker_count": 2}}
    run_dir, peak_mb, wall = run_and_watch(spec, tmp_path / "outputs")
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "done" and summary["episodes_finished"] == count
    per_window = rates(summary["episodes"])
    size_mb = (run_dir / "summary.json").stat().st_size / 2**20
    print(f"\nlong run: {count} GoToLocal episodes, bot, K=2, frames default; "
          f"wall {wall:.1f} s")
    print("  episodes/s per 1,000: " + " ".join(f"{r:.0f}" for r in per_window))
    print(f"  last/first: {per_window[-1] / per_window[0]:.3f}  "
          f"(min/first {min(per_window) / per_window[0]:.3f})")
    print(f"  run process peak RSS: {peak_mb:.0f} MiB; final summary.json {size_mb:.1f} MiB")
