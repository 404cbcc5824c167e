"""ExecutionLogger: the episode's log.jsonl, whether the recorder made it ahead or not."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import orjson

from evaltui.engine.episode.logger import ExecutionLogger
from evaltui.engine.episode.tiles import TileAtlas, TiledFrame
from evaltui.rundir.framefile import FRAMES_FILENAME, read_frame


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


def tiled(value: int) -> TiledFrame:
    atlas = TileAtlas((2, 2))
    for shade in range(4):
        atlas.add(np.full((2, 2, 3), shade * 60, np.uint8))
    return TiledFrame(atlas, np.full((3, 4), value, np.uint16))


def test_frames_go_to_disk_with_the_lines_that_refer_to_them(tmp_path: Path) -> None:
    """frames.bin is written in the log's batches, each just before its lines: a line on
    disk always finds its frame, and a step waiting for the batch writes nothing."""
    ep = tmp_path / "ep0000"
    frames = ep / FRAMES_FILENAME

    def refs_on_disk() -> list[dict]:
        return [r["outputs"]["frame"] for r in lines(ep / "log.jsonl")
                if (r["outputs"] or {}).get("frame")]

    log = ExecutionLogger(ep, flush_interval_sec=60.0)  # one write, then a batch at close
    try:
        log.record("episode_start", step=0, outputs={"frame": tiled(0)})
        log.flush()  # the first step end writes at once: frame, then line
        (first,) = refs_on_disk()
        assert np.array_equal(read_frame(frames, first["at"]), tiled(0).pixels)
        size = frames.stat().st_size
        for step in (1, 2):
            log.record("fire", step=step, node="env", outputs={"frame": tiled(step)})
            log.flush()  # within the interval: the step waits, its frame too
        assert len(refs_on_disk()) == 1 and frames.stat().st_size == size
    finally:
        log.close()
    refs = refs_on_disk()
    assert len(refs) == 3
    for value, ref in enumerate(refs):
        assert np.array_equal(read_frame(frames, ref["at"]), tiled(value).pixels)
