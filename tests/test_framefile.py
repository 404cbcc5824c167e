"""frames.bin: round trip, each tile stored once, the tiles chain, and corrupt files refused."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from evaltui.engine.episode.tiles import TileAtlas, TiledFrame
from evaltui.rundir.framefile import FRAMES_FILENAME, FrameFileError, FrameFileWriter, read_frame

TILES_HEAD = struct.calcsize("<cIIHHQ")
FRAME_HEAD = struct.calcsize("<cIHHQ")


def atlas_of(n: int, shape: tuple[int, int] = (3, 2), seed: int = 0) -> TileAtlas:
    rng = np.random.default_rng(seed)
    atlas = TileAtlas(shape)
    for _ in range(n):
        atlas.add(rng.integers(0, 256, (*shape, 3), dtype=np.uint8))
    return atlas


def write(ep: Path, frames: list[TiledFrame]) -> list[dict]:
    writer = FrameFileWriter(ep)
    refs = [writer.write(f) for f in frames]
    writer.close()
    return refs


def test_round_trip_with_two_atlases_and_tiles_written_once(tmp_path: Path) -> None:
    small, big = atlas_of(5), atlas_of(300, shape=(4, 4), seed=1)
    rng = np.random.default_rng(2)
    frames = [TiledFrame(small, rng.integers(0, 3, (2, 7), dtype=np.uint16)) for _ in range(4)]
    frames += [TiledFrame(big, rng.integers(0, 300, (5, 3), dtype=np.uint16)) for _ in range(3)]
    frames.append(TiledFrame(small, np.full((2, 7), 4, np.uint16)))  # one more tile of it
    refs = write(tmp_path, frames)
    for frame, ref in zip(frames, refs, strict=True):
        assert ref["$frame"] == FRAMES_FILENAME and ref["shape"] == list(frame.shape)
        assert np.array_equal(read_frame(tmp_path / FRAMES_FILENAME, ref["at"]), frame.pixels)
    # Expected size: each frame's record, plus a tiles record with only the tiles that
    # no earlier frame of its atlas used.
    seen: dict[int, set[int]] = {}
    expected = 8
    for frame in frames:
        ids = {int(i) for i in frame.index.ravel()}
        new = ids - seen.setdefault(frame.atlas.uid, set())
        seen[frame.atlas.uid] |= ids
        h, w = frame.atlas.tile_shape
        expected += (TILES_HEAD + len(new) * (4 + h * w * 3)) if new else 0
        expected += FRAME_HEAD + 2 * frame.index.size
    assert (tmp_path / FRAMES_FILENAME).stat().st_size == expected


def test_a_new_episode_truncates_the_file(tmp_path: Path) -> None:
    atlas = atlas_of(3)
    for _ in range(2):  # a retried episode writes into the same dir
        (ref,) = write(tmp_path, [TiledFrame(atlas, np.array([[0, 1, 2]], np.uint16))])
    tiles = TILES_HEAD + 3 * (4 + 18)
    assert ref["at"] == 8 + tiles
    assert (tmp_path / FRAMES_FILENAME).stat().st_size == 8 + tiles + FRAME_HEAD + 6


def test_corrupt_or_foreign_files_are_refused(tmp_path: Path) -> None:
    atlas = atlas_of(3)
    (ref,) = write(tmp_path, [TiledFrame(atlas, np.array([[0, 1], [2, 2]], np.uint16))])
    at, path = ref["at"], tmp_path / FRAMES_FILENAME
    assert isinstance(FrameFileError("x"), OSError)  # callers treat it as an unreadable file
    for bad_at in (0, 3, 8, at + 1, 10_000):  # 8 is the tiles record, not a frame
        with pytest.raises(FrameFileError):
            read_frame(path, bad_at)
    good = path.read_bytes()
    path.write_bytes(good[:-1])
    with pytest.raises(FrameFileError, match="truncated"):
        read_frame(path, at)
    frame_head = struct.pack("<cIHHQ", b"F", 0, 2, 2, 8)
    path.write_bytes(good[:at] + frame_head + struct.pack("<4H", 0, 1, 2, 9))
    with pytest.raises(FrameFileError, match="lacks tiles"):
        read_frame(path, at)
    path.write_bytes(good[:at] + struct.pack("<cIHHQ", b"F", 0, 2, 2, at) +
                     good[at + FRAME_HEAD:])
    with pytest.raises(FrameFileError, match="no tiles record"):
        read_frame(path, at)
    path.write_bytes(b"PNG....." + good[8:])
    with pytest.raises(FrameFileError, match="not a frames file"):
        read_frame(path, at)


def test_frames_find_their_tiles_along_the_chain(tmp_path: Path) -> None:
    """Each frame brings one new tile: the last frame's tiles are spread over 40 records."""
    atlas = atlas_of(40)
    frames = [TiledFrame(atlas, np.arange(k + 1, dtype=np.uint16).reshape(1, -1))
              for k in range(40)]
    refs = write(tmp_path, frames)
    for frame, ref in zip(frames, refs, strict=True):
        assert np.array_equal(read_frame(tmp_path / FRAMES_FILENAME, ref["at"]), frame.pixels)


def test_a_file_made_ahead_empty_is_written_in_place(tmp_path: Path) -> None:
    path = tmp_path / FRAMES_FILENAME
    path.touch()  # as the pool's recorder makes it
    made = path.stat().st_ino
    frame = TiledFrame(atlas_of(3), np.array([[2, 0, 1]], np.uint16))
    (ref,) = write(tmp_path, [frame])
    assert path.stat().st_ino == made and path.read_bytes().startswith(b"EVTFRAM2")
    assert np.array_equal(read_frame(path, ref["at"]), frame.pixels)
