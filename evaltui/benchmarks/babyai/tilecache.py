"""The tiles minigrid rendered, kept on disk for every later worker and run.

minigrid draws a tile by evaluating shape functions per sub-pixel in Python: ~4 ms a tile
at tile_size 8, so a fresh worker spends 0.1-0.3 s rendering the few dozen tiles of its
first episodes (0.35 ms a step over a 10-episode GoToObjMaze run). Each tile rendered is
appended here, and a new :class:`~.frames.GridFrames` starts from every tile already
known. The file is per minigrid version and tile size (``<state dir>/cache/
minigrid-<version>/tiles<size>.bin``); records are ``<b type, b colour, b state, b agent
direction (-1: none), H size>``, ``size * size * 3`` RGB bytes and the CRC-32 of both,
appended with ``O_APPEND`` so that concurrent workers never interleave records; a
duplicate (two workers rendering the same tile) is harmless, the first record wins. A
record that fails its check ends the reading and the file is cut back to the good
records before it: a wrong tile would be a wrong frame, a missing one only costs a render.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path

import numpy as np

from evaltui.rundir.layout import PRIVATE_MODE, state_dir

from .minigrid_import import MINIGRID_VERSION

log = logging.getLogger(__name__)

TileKey = tuple[int, int, int, int]
"""(type, colour, state, agent direction or -1)."""
_HEAD = struct.Struct("<bbbbH")
_CRC = struct.Struct("<I")


def cache_path(tile_size: int) -> Path:
    return state_dir() / "cache" / f"minigrid-{MINIGRID_VERSION}" / f"tiles{tile_size}.bin"


def load_tiles(tile_size: int) -> list[tuple[TileKey, np.ndarray]]:
    """The cached tiles of ``tile_size`` in file order (empty if there is no cache)."""
    path = cache_path(tile_size)
    try:
        raw = path.read_bytes()
    except OSError:
        return []
    tiles: list[tuple[TileKey, np.ndarray]] = []
    pos, size = 0, tile_size * tile_size * 3
    step = _HEAD.size + size + _CRC.size
    while pos + step <= len(raw):
        kind, colour, state, direction, side = _HEAD.unpack_from(raw, pos)
        (crc,) = _CRC.unpack_from(raw, pos + step - _CRC.size)
        if side != tile_size or zlib.crc32(raw[pos:pos + step - _CRC.size]) != crc:
            log.warning("tile cache %s is corrupt at byte %d; cut back to there", path, pos)
            _cut(path, raw[:pos])
            break
        pixels = np.frombuffer(raw, np.uint8, size, pos + _HEAD.size)
        tiles.append(((kind, colour, state, direction), pixels.reshape(side, side, 3)))
        pos += step
    return tiles


def _cut(path: Path, good: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(good)
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("tile cache %s not repaired: %r", path, exc)


def save_tile(tile_size: int, key: TileKey, tile: np.ndarray) -> None:
    """Append one rendered tile (best effort: a cache that cannot be written is skipped)."""
    path = cache_path(tile_size)
    record = _HEAD.pack(*key, tile_size) + np.ascontiguousarray(tile, np.uint8).tobytes()
    record += _CRC.pack(zlib.crc32(record))
    try:
        path.parent.parent.mkdir(mode=0o700, exist_ok=True)  # in the state dir: private
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_MODE)
        try:
            os.write(fd, record)  # one write: O_APPEND keeps it whole among other writers
        finally:
            os.close(fd)
    except OSError as exc:
        log.debug("tile cache %s not written: %r", path, exc)
