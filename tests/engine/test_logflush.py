"""log.jsonl's batched writes: whole steps, one write per interval, each step visible
within about the interval of its end (also while the next step blocks, and in a forked
worker), everything on disk when the logger closes."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import orjson
import pytest

from evaltui.engine.episode.logflush import StepWriter
from evaltui.engine.episode.logger import ExecutionLogger


def steps_on_disk(path: Path) -> list[int]:
    data = path.read_bytes()
    assert not data or data.endswith(b"\n")  # whole lines only
    return [orjson.loads(line)["step"] for line in data.splitlines()]


def wait_for(predicate, timeout: float) -> float:
    """Seconds until ``predicate()`` held; fails after ``timeout``."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            pytest.fail(f"not within {timeout} s")
        time.sleep(0.002)
    return time.monotonic() - t0


def fire(logger: ExecutionLogger, step: int) -> None:
    logger.record("fire", step=step, node="policy", inputs={"x": step}, outputs={"a": 1})
    logger.record("fire", step=step, node="env_step", inputs={"a": 1}, outputs={"done": False})


def test_steps_ending_within_the_interval_are_written_together(tmp_path: Path) -> None:
    log = tmp_path / "ep0000" / "log.jsonl"
    with ExecutionLogger(tmp_path / "ep0000", flush_interval_sec=0.6) as logger:
        logger.record("episode_start", step=0)
        logger.flush()
        assert steps_on_disk(log) == [0]  # the first write is at once
        for step in (1, 2, 3):
            fire(logger, step)
            logger.flush()
        assert steps_on_disk(log) == [0]  # the next steps wait for the interval
        waited = wait_for(lambda: len(steps_on_disk(log)) == 7, timeout=5)
        assert steps_on_disk(log) == [0, 1, 1, 2, 2, 3, 3]
        assert waited > 0.2  # written by the flusher's tick, not at once


def test_a_step_is_seen_soon_while_the_next_one_blocks(tmp_path: Path) -> None:
    log = tmp_path / "ep0000" / "log.jsonl"
    with ExecutionLogger(tmp_path / "ep0000") as logger:  # the default interval, 50 ms
        logger.record("episode_start", step=0)
        logger.flush()
        fire(logger, 1)
        logger.flush()
        logger.record("fire", step=2, node="policy")  # step 2 in progress: a node blocks
        assert wait_for(lambda: steps_on_disk(log) == [0, 1, 1], timeout=5) < 0.5
        time.sleep(0.2)
        assert steps_on_disk(log) == [0, 1, 1]  # never a step in progress
    assert steps_on_disk(log) == [0, 1, 1, 2]  # close writes the step cut short


def test_close_writes_every_step_waiting(tmp_path: Path) -> None:
    log = tmp_path / "ep0000" / "log.jsonl"
    with ExecutionLogger(tmp_path / "ep0000", flush_interval_sec=30) as logger:
        for step in range(5):
            fire(logger, step)
            logger.flush()
        assert steps_on_disk(log) == [0, 0]
    assert steps_on_disk(log) == [s for s in range(5) for _ in range(2)]


def _child(ep_dir: str, seen: multiprocessing.synchronize.Event) -> None:
    with ExecutionLogger(Path(ep_dir)) as logger:
        fire(logger, 0)
        logger.flush()
        fire(logger, 1)
        logger.flush()
        if not seen.wait(10):
            os._exit(3)
    os._exit(0)


def test_a_forked_worker_gets_its_own_flusher(tmp_path: Path) -> None:
    # This process has a flusher thread already; a fork of it has none until it logs.
    with ExecutionLogger(tmp_path / "here") as logger:
        fire(logger, 0)
        logger.flush()
        fire(logger, 1)
        logger.flush()
    ctx = multiprocessing.get_context("fork")
    seen = ctx.Event()
    child = ctx.Process(target=_child, args=(str(tmp_path / "child"), seen))
    child.start()
    log = tmp_path / "child" / "log.jsonl"
    wait_for(lambda: log.is_file() and steps_on_disk(log) == [0, 0, 1, 1], timeout=10)
    seen.set()  # step 1 was written before the child closed its log
    child.join(10)
    assert child.exitcode == 0


def test_a_failed_background_write_is_raised_at_the_next_step_end(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o666)
    writer = StepWriter(fd, interval=0.05)
    writer.append(b'{"step": 0}\n')
    writer.end_step()
    readonly = os.open(path, os.O_RDONLY)
    os.dup2(readonly, fd)  # from now on a write fails (EBADF), as on a broken disk
    os.close(readonly)
    writer.append(b'{"step": 1}\n')
    writer.end_step()  # waits for the flusher, whose write fails
    time.sleep(0.3)
    with pytest.raises(OSError):
        writer.end_step()
    writer.close()
    assert path.read_bytes() == b'{"step": 0}\n'
