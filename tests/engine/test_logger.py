"""ExecutionLogger: the episode's log.jsonl, whether the recorder made it ahead or not."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from evaltui.engine.logger import ExecutionLogger


def lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_a_retried_episode_starts_its_log_afresh(tmp_path: Path) -> None:
    ep = tmp_path / "ep0003"
    ep.mkdir()
    (ep / "log.jsonl").write_bytes(b'{"event": "fire", "step": 1}\n' * 50)
    with ExecutionLogger(ep) as log:
        log.record("episode_start", step=0, outputs={"obs": [1, 2]})
        log.flush()
    assert [(r["event"], r["step"], r["outputs"]) for r in lines(ep / "log.jsonl")] == [
        ("episode_start", 0, {"obs": [1, 2]})]


def test_a_log_made_ahead_is_written_in_place(tmp_path: Path) -> None:
    ep = tmp_path / "ep0000"
    ep.mkdir()
    os.close(os.open(ep / "log.jsonl", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    made = (ep / "log.jsonl").stat().st_ino
    with ExecutionLogger(ep) as log:
        log.record("fire", step=1, node="policy", inputs={"x": 1}, outputs={"action": 2})
    assert (ep / "log.jsonl").stat().st_ino == made
    assert [r["outputs"] for r in lines(ep / "log.jsonl")] == [{"action": 2}]


def test_a_missing_ep_dir_is_made(tmp_path: Path) -> None:
    ep = tmp_path / "episodes" / "ep0007"
    with ExecutionLogger(ep) as log:
        log.record("episode_start", step=0)
    assert [r["event"] for r in lines(ep / "log.jsonl")] == ["episode_start"]
