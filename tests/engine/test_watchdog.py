"""LogWatch: which phase a busy episode is in, from its log (the hung-episode watch)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from evaltui.engine.executor.watchdog import LogWatch


def premade_log(tmp_path: Path) -> Path:
    """An empty log made ahead of the deal, as the pool's recorder makes it."""
    log = tmp_path / "ep0001" / "log.jsonl"
    log.parent.mkdir()
    os.close(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    return log


def test_a_log_written_just_after_the_deal_is_the_episodes(tmp_path: Path) -> None:
    # The write's mtime comes from the kernel's coarse clock (a tick, 4 ms, behind
    # time.time()): read against the deal's wall time alone, this log looked older than
    # the deal, so the episode seemed to be resetting for good (its reset budget, not
    # its step budget, applied to a node blocking in step 1).
    log = premade_log(tmp_path)
    watch = LogWatch(log)
    fd = os.open(log, os.O_WRONLY)
    os.write(fd, b'{"event": "episode_start", "step": 0}\n')
    os.close(fd)
    assert watch.stall(time.monotonic()) == ("step", 0.0)


def test_an_earlier_attempts_log_is_not_the_episodes(tmp_path: Path) -> None:
    log = premade_log(tmp_path)
    log.write_bytes(b'{"event": "episode_start", "step": 0}\n')
    old = time.time() - 1.0
    os.utime(log, (old, old))
    watch = LogWatch(log)
    phase, stalled = watch.stall(time.monotonic() + 0.5)
    assert phase == "reset" and stalled >= 0.5
    assert watch.hung_reason(time.monotonic() + 3.0, step_sec=0.3, reset_sec=60.0) is None


def test_an_empty_log_is_an_env_still_resetting(tmp_path: Path) -> None:
    watch = LogWatch(premade_log(tmp_path))
    reason = watch.hung_reason(time.monotonic() + 62.0, step_sec=0.3, reset_sec=60.0)
    assert reason is not None and reason.startswith("set_episode (env reset) made no progress")
