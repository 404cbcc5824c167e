"""frames.bin / tiles.bin: round trip, tiles stored once, and corrupt files refused."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from evaltui.engine.tiles import TileAtlas, TiledFrame
from evaltui.framefile import (
    FRAMES_FILENAME,
    TILES_FILENAME,
    FrameFileError,
    FrameFileWriter,
    read_frame,
)


def atlas_of(n: int, shape: tuple[int, int] = (3, 2), seed: int = 0) -> TileAtlas:
    rng = np.random.default_rng(seed)
    atlas = TileAtlas(shape)
    for _ in range(n):
        atlas.add(rng.integers(0, 256, (*shape, 3), dtype=np.uint8))
    return atlas


def test_round_trip_with_two_atlases_and_tiles_written_once(tmp_path: Path) -> None:
    small, big = atlas_of(5), atlas_of(300, shape=(4, 4), seed=1)
    rng = np.random.default_rng(2)
    frames = [TiledFrame(small, rng.integers(0, 3, (2, 7), dtype=np.uint16)) for _ in range(4)]
    frames += [TiledFrame(big, rng.integers(0, 300, (5, 3), dtype=np.uint16)) for _ in range(3)]
    frames.append(TiledFrame(small, np.full((2, 7), 4, np.uint16)))  # one more tile of it
    writer = FrameFileWriter(tmp_path / "assets")
    refs = [writer.write(f) for f in frames]
    writer.close()
    for frame, ref in zip(frames, refs, strict=True):
        assert ref["$frame"] == "assets/frames.bin" and ref["shape"] == list(frame.shape)
        got = read_frame(tmp_path / "assets" / FRAMES_FILENAME, ref["at"])
        assert np.array_equal(got, frame.pixels)
    used_small = {int(i) for f in frames[:4] for i in f.index.ravel()} | {4}
    used_big = {int(i) for f in frames[4:7] for i in f.index.ravel()}
    tile_bytes = (12 + 3 * 2 * 3) * len(used_small) + (12 + 4 * 4 * 3) * len(used_big)
    assert (tmp_path / "assets" / TILES_FILENAME).stat().st_size == 8 + tile_bytes


def test_a_new_episode_truncates_the_files(tmp_path: Path) -> None:
    atlas = atlas_of(3)
    for _ in range(2):  # a retried episode writes into the same dir
        writer = FrameFileWriter(tmp_path)
        ref = writer.write(TiledFrame(atlas, np.array([[0, 1, 2]], np.uint16)))
        writer.close()
    assert ref["at"] == 8
    assert (tmp_path / FRAMES_FILENAME).stat().st_size == 8 + 8 + 6


def test_corrupt_or_foreign_files_are_refused(tmp_path: Path) -> None:
    atlas = atlas_of(3)
    writer = FrameFileWriter(tmp_path)
    at = writer.write(TiledFrame(atlas, np.array([[0, 1], [2, 2]], np.uint16)))["at"]
    writer.close()
    frames = tmp_path / FRAMES_FILENAME
    assert isinstance(FrameFileError("x"), OSError)  # callers treat it as an unreadable file
    for bad_at in (0, 3, at + 1, 10_000):
        with pytest.raises(FrameFileError):
            read_frame(frames, bad_at)
    good = frames.read_bytes()
    frames.write_bytes(good[:-1])  # truncated record
    with pytest.raises(FrameFileError, match="truncated"):
        read_frame(frames, at)
    frames.write_bytes(good[:at] + struct.pack("<IHH", 0, 2, 2) + struct.pack("<4H", 0, 1, 2, 9))
    with pytest.raises(FrameFileError, match="lacks tiles"):
        read_frame(frames, at)
    frames.write_bytes(b"PNG....." + good[8:])
    with pytest.raises(FrameFileError, match="not a frames file"):
        read_frame(frames, at)
    (tmp_path / TILES_FILENAME).unlink()
    frames.write_bytes(good)
    with pytest.raises(FileNotFoundError):
        read_frame(frames, at)


def test_a_tile_half_written_is_not_read(tmp_path: Path) -> None:
    atlas = atlas_of(2)
    writer = FrameFileWriter(tmp_path)
    at = writer.write(TiledFrame(atlas, np.array([[0]], np.uint16)))["at"]
    writer.close()
    tiles = tmp_path / TILES_FILENAME
    with tiles.open("ab") as fh:  # a writer killed in the middle of its next tile
        fh.write(struct.pack("<IIHH", 0, 1, 3, 2) + b"\x00" * 5)
    assert np.array_equal(read_frame(tmp_path / FRAMES_FILENAME, at), atlas.tile(0))
