"""The run screen's progress says when the run's writes wait for room on a full disk."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from evaltui.tui.widgets.run_progress import Progress


def test_progress_says_the_run_waits_for_room_and_then_that_it_waited() -> None:
    now = datetime.now().astimezone()
    waiting = {"episodes_total": 10, "disk_wait": {
        "path": "/o/eval_runs/r/episodes/ep0003", "waited_sec": 0.4,
        "waiting_since": "2026-12-01T10:24:31.123+00:00"}}
    note = Progress.of(waiting, Counter(ok=3), True, now).disk_note
    assert note == "⚠ disk full: waiting for room for /o/eval_runs/r/episodes/ep0003 since " \
        "10:24:31"
    waited = {"episodes_total": 10, "disk_wait": {"path": "/o/x", "waited_sec": 2.14,
                                                  "waiting_since": None}}
    assert Progress.of(waited, Counter(ok=10), False, now).disk_note == \
        "waited 2.1 s for room on a full disk"
    assert Progress.of({"episodes_total": 10}, Counter(), True, now).disk_note is None
