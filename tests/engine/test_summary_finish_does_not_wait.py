"""SummaryWriter.finish: the final summary is written without waiting out the flusher's
idle wait (up to 0.2 s at every run's end, before `_DONE`)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from waiting import wait_until

from evaltui.contract.states import SummaryStatus
from evaltui.engine.run.summary import SummaryWriter
from evaltui.rundir.jsonfiles import write_json_atomic

HEADER = {"run_id": "r", "graph_name": "g", "dataset": "d", "split": "s", "worker_count": 1}


def test_finish_does_not_wait_for_the_idle_flusher(tmp_path: Path) -> None:
    took = []
    for i in range(5):
        run_dir = tmp_path / str(i)
        run_dir.mkdir()
        writer = SummaryWriter(run_dir, HEADER, 0).start()
        time.sleep(0.02)  # the flusher is in its idle wait now
        t0 = time.perf_counter()
        writer.finish(SummaryStatus.DONE)
        took.append(time.perf_counter() - t0)
        assert not writer._thread.is_alive()
        assert json.loads((run_dir / "summary.json").read_text())["status"] == "done"
    # Waiting out the idle wait took ~0.18 s each time; the best of five is far below.
    assert min(took) < 0.08, took


def test_episode_files_are_synced_between_summary_writes(tmp_path: Path) -> None:
    """Rows' files are fsynced in batches while the run goes on, not all by the next
    summary write (a short run's end waited for every file of its last second)."""
    writer = SummaryWriter(tmp_path, HEADER, 10, interval_sec=30.0).start()
    try:
        first_write = (tmp_path / "summary.json").stat().st_mtime_ns
        for i in range(10):
            ep = tmp_path / f"ep{i:04d}"
            ep.mkdir()
            write_json_atomic(ep / "episode.json", {"i": i}, durable=False)
            writer.add({**HEADER, "episode_index": i, "episode_id": f"e{i}", "status": "ok",
                        "step_count": 1, "elapsed_sec": 0.1, "metrics": {}},
                       unsynced=[ep / "episode.json"])
        wait_until(lambda: writer.unsynced_count == 0, timeout=5,
                   what="the flusher to sync the episode files")
        # ... with no summary write in between (the next is 30 s away).
        assert (tmp_path / "summary.json").stat().st_mtime_ns == first_write
    finally:
        writer.finish(SummaryStatus.DONE)
    assert len(json.loads((tmp_path / "summary.json").read_text())["episodes"]) == 10
