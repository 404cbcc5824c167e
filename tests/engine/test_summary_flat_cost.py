"""Issue 34: a long run's summary costs the same per episode at 5,000 as at 1.

summary.json was rewritten whole, every row, about once a second: the bytes written grew
with the square of the episode count. Now each row is written once (rows.jsonl) and the
running summary.json holds aggregates only; the final one holds every row. And the
readers of a run dir read a running run, a finished one and one of the earlier layout
(every row in the running summary.json) alike.
"""

from __future__ import annotations

import gc
import json
import math
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from evaltui.contract.records import ROWS_FILENAME, Summary
from evaltui.contract.states import SummaryStatus
from evaltui.engine.episode.metrics import aggregate
from evaltui.engine.run.summary import SummaryWriter
from evaltui.results.runrows import load_run
from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.rundir.status import read_run_status

HEADER = {"run_id": "20250101_120000", "graph_name": "bot", "dataset": "babyai",
          "split": "GoToLocal", "worker_count": 2}
WRITE_EVERY = 50
"""Rows between two summary writes (a 250 episodes/s run writes once per 250)."""


def row(index: int) -> dict[str, Any]:
    status = "error" if index % 7 == 3 else "ok"
    success = float(index % 3 != 0) if status == "ok" else 0.0
    return {**HEADER, "episode_index": index, "episode_id": f"GoToLocal-{index:05d}",
            "scene_id": f"BabyAI-GoToLocal-v0:seed={index}", "instruction": "go to the ball",
            "status": status, "error": "boom" if status == "error" else None,
            "metrics": {"success": success, "spl": success * 0.8, "steps": 5.0 + index % 11},
            "step_count": 6, "elapsed_sec": 0.01, "worker_id": index % 2, "attempts": 1}


class Measured:
    """Bytes that reached the run dir, seen from outside the writer: summary.json's size
    at each write plus what rows.jsonl grew by."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.total = 0
        self._rows_size = 0

    def after_write(self) -> None:
        self.total += (self.run_dir / "summary.json").stat().st_size
        rows = self.run_dir / ROWS_FILENAME
        size = rows.stat().st_size if rows.exists() else 0
        self.total += max(0, size - self._rows_size)
        self._rows_size = size


def test_summary_bytes_grow_linearly_with_the_episode_count(tmp_path: Path) -> None:
    writer = SummaryWriter(tmp_path, HEADER, 5000, interval_sec=3600.0).start()
    measured = Measured(tmp_path)
    per_thousand = []
    try:
        for index in range(5000):
            writer.add(row(index))
            if (index + 1) % WRITE_EVERY == 0:
                writer.write()
                measured.after_write()
            if (index + 1) % 1000 == 0:
                per_thousand.append(measured.total - sum(per_thousand))
    finally:
        writer.finish(SummaryStatus.DONE)
    first, last = per_thousand[0], per_thousand[-1]
    # Linear: every 1,000 episodes cost about the same. Rewriting every row at each write
    # made the fifth thousand cost ~9x the first (and 25x the bytes over the whole run).
    assert last < 1.5 * first, per_thousand
    # The writer counts the same bytes (its own measure, used by the benchmark).
    assert writer.bytes_written >= measured.total

    final = json.loads((tmp_path / "summary.json").read_text())
    rows = [row(i) for i in range(5000)]
    assert [r["episode_index"] for r in final["episodes"]] == list(range(5000))
    assert final["rows_file"] is None and not (tmp_path / ROWS_FILENAME).exists()
    exact = aggregate(rows)
    assert final["metrics"] == exact.means and final["metrics_n"] == exact.n
    assert final["counts_by_status"] == {"ok": 4286, "error": 714}
    assert final["first_error"]["episode_index"] == 3
    Summary.model_validate(final)


def test_the_running_snapshot_holds_aggregates_not_rows(tmp_path: Path) -> None:
    writer = SummaryWriter(tmp_path, HEADER, 100, interval_sec=3600.0).start()
    try:
        rows = [row(i) for i in range(60)]
        for r in rows:
            writer.add(r)
        writer.write()
        writer.add({**row(3), "status": "ok", "error": None})  # a re-run replaces the error
        rows[3] = {**row(3), "status": "ok", "error": None}
        writer.write()
        snap = json.loads((tmp_path / "summary.json").read_text())
        assert "episodes" not in snap and snap["rows_file"] == ROWS_FILENAME
        assert snap["episodes_finished"] == 60 and snap["error_count"] == 8
        assert snap["first_error"]["episode_index"] == 10  # 3's error was replaced
        exact = aggregate(rows)
        assert snap["metrics_n"] == exact.n
        for name, mean in exact.means.items():
            assert math.isclose(snap["metrics"][name], mean, rel_tol=1e-12)
            for got, want in zip(snap["metrics_ci95"][name], exact.ci95[name], strict=True):
                assert math.isclose(got, want, rel_tol=1e-9)
        lines = (tmp_path / ROWS_FILENAME).read_bytes().splitlines()
        assert len(lines) == 61  # each row written once, the re-run appended
    finally:
        writer.finish(SummaryStatus.DONE)


def test_the_writer_holds_no_rows_in_memory(tmp_path: Path) -> None:
    """What the writer keeps per episode is where its line lies, not the row."""
    writer = SummaryWriter(tmp_path, HEADER, 6000, interval_sec=3600.0).start()
    try:
        for index in range(1000):
            writer.add(row(index))
        writer.write()
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for index in range(1000, 6000):
            writer.add(row(index))
            if index % WRITE_EVERY == 0:
                writer.write()
        writer.write()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
    finally:
        writer.finish(SummaryStatus.DONE)
    # A row kept as its JSON dict costs ~1.1 KB here (measured); an index entry ~220 bytes.
    assert grown < 5000 * 500, grown


def _run_dir(tmp_path: Path, layout: str) -> tuple[Path, list[dict[str, Any]]]:
    """A run dir with 30 finished episodes: running (this version's layout or the earlier
    one, every row in summary.json) or finished."""
    run_dir = tmp_path / HEADER["run_id"]
    run_dir.mkdir()
    rows = [row(i) for i in range(30)]
    for r in rows:
        ep = run_dir / "episodes" / f"ep{r['episode_index']:04d}"
        ep.mkdir(parents=True)
        write_json_atomic(ep / "episode.json", r, durable=False)
    writer = SummaryWriter(run_dir, HEADER, 50, interval_sec=3600.0).start()
    for r in rows:
        writer.add(r)
    if layout == "finished":
        writer.finish(SummaryStatus.DONE)
        return run_dir, rows
    writer.write()
    if layout == "earlier":  # what earlier versions wrote while running: every row
        snap = json.loads((run_dir / "summary.json").read_text())
        del snap["rows_file"]
        snap["episodes"] = rows
        write_json_atomic(run_dir / "summary.json", snap)
        (run_dir / ROWS_FILENAME).unlink()
    return run_dir, rows


@pytest.mark.parametrize("layout", ["running", "earlier", "finished"])
def test_readers_read_every_layout(tmp_path: Path, layout: str) -> None:
    run_dir, rows = _run_dir(tmp_path, layout)
    loaded = load_run(run_dir)
    assert loaded.problems == []
    assert [r["episode_index"] for r in loaded.rows] == list(range(30))
    assert [r["status"] for r in loaded.rows] == [r["status"] for r in rows]
    status = read_run_status(run_dir)
    assert status.summary is not None and status.summary["episodes_finished"] == 30
    assert status.summary["metrics"]["success"] == pytest.approx(aggregate(rows).means["success"])


def test_a_second_final_write_still_has_every_row(tmp_path: Path) -> None:
    """A run whose ``_DONE`` hit a full disk after its final summary writes the summary
    again (failed): the rows are still there although rows.jsonl is gone."""
    writer = SummaryWriter(tmp_path, HEADER, 10, interval_sec=3600.0).start()
    for index in range(10):
        writer.add(row(index))
    writer.finish(SummaryStatus.DONE)
    assert not (tmp_path / ROWS_FILENAME).exists()
    writer.finish(SummaryStatus.FAILED, "disk full: _DONE", wait_for_room=False)
    final = json.loads((tmp_path / "summary.json").read_text())
    assert final["status"] == "failed" and len(final["episodes"]) == 10
