"""An episode's tiled frames on disk: one append-only file, ``ep{NNNN}/frames.bin``.

A :class:`~evaltui.engine.episode.tiles.TiledFrame` is stored as its tile ids, and each tile the
episode uses once, so a frame costs two bytes a grid cell and no image encoding. One file
per episode, next to log.jsonl: creating a file or directory costs ~0.3-0.6 ms on the
development VM's ext4, as much as a short GoToLocal episode's frames themselves.

Layout (little-endian): the 8-byte magic ``EVTFRAM2``, then records of two kinds:

- tiles ``<c "T", I atlas, I count, H height, H width, Q previous>`` then ``count`` times
  ``<I tile_id>`` and ``height * width * 3`` RGB bytes; ``previous`` is the offset of the
  tiles record written before this one (0: none), so the tiles records form a chain;
- frame ``<c "F", I atlas, H rows, H cols, Q tiles>`` then ``rows * cols`` uint16 tile
  ids; ``tiles`` is the offset of the last tiles record written before the frame (0:
  none); cell (r, c) of the picture is tile ``ids[r, c]`` of that atlas.

A reader finds a frame's tiles by following the chain back from its ``tiles`` offset
(one short read per record that brought new tiles, a few dozen in an episode), never by
scanning the file. log.jsonl refers to a frame as ``{"$frame": "frames.bin", "at":
<offset of its record>, "shape": [H, W, 3]}``. The writer keeps the records of the frames
since its last ``flush`` in memory; the episode's log writer calls ``flush`` right before
it writes log lines (:mod:`evaltui.engine.episode.logflush`), so the frames go to disk in the
same ~50 ms batches as the lines, always ahead of any line that refers to them: a
process killed at any point leaves every logged reference resolvable. This module
depends on numpy only: the run's workers write it and the replay viewer reads it.
"""

from __future__ import annotations

import os
import struct
import threading
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import numpy as np

from evaltui.rundir.diskfull import DISK

FRAMES_FILENAME = "frames.bin"
MAGIC = b"EVTFRAM2"
_TILES = struct.Struct("<cIIHHQ")
_TILE_ID = struct.Struct("<I")
_FRAME = struct.Struct("<cIHHQ")
FRAMES_MODE = 0o644
MAX_CELLS = 1 << 20
"""A frame record claiming more cells than this is corrupt (a 1024x1024 grid)."""
MAX_CHAIN = 1 << 16
"""More tiles records than tile ids exist means a loop in a corrupt chain."""


class FrameFileError(OSError):
    """A frames.bin record is missing, truncated or inconsistent (an OSError, as PIL's
    UnidentifiedImageError is: callers handle an unreadable frame as one)."""


@dataclass
class _Atlas:
    number: int
    written: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))


class FrameFileWriter:
    """Appends the tiled frames of one episode to ``ep_dir/frames.bin`` (opened at the
    first, made if the pool's recorder has not made it; a retried episode's first frame
    truncates it). ``write`` keeps a frame's bytes until ``flush`` (or ``close``), which
    another thread may call: the log's flusher."""

    def __init__(self, ep_dir: Path) -> None:
        self.path = Path(ep_dir) / FRAMES_FILENAME
        self._fd: int | None = None
        self._pos = 0
        self._last_tiles = 0
        self._atlases: dict[int, _Atlas] = {}
        self._pending: list[bytes] = []
        self._lock = threading.Lock()

    def write(self, frame: Any) -> dict[str, Any]:
        """Store a TiledFrame (on disk at the next ``flush``); returns its log.jsonl
        stand-in."""
        if self._fd is None:
            self._fd = open_fresh(self.path, FRAMES_MODE)
            self._pending.append(MAGIC)
            self._pos = len(MAGIC)
        atlas = self._atlases.get(frame.atlas.uid)
        if atlas is None:
            atlas = self._atlases[frame.atlas.uid] = _Atlas(len(self._atlases))
        index = np.asarray(frame.index, dtype="<u2")
        count = len(frame.atlas)
        if len(atlas.written) < count:
            atlas.written = np.concatenate([atlas.written,
                                            np.zeros(count - len(atlas.written), bool)])
        used = np.zeros(count, bool)
        used[index] = True
        new = np.flatnonzero(used & ~atlas.written)
        chunks = []
        if new.size:
            h, w = frame.atlas.tile_shape
            chunks.append(_TILES.pack(b"T", atlas.number, new.size, h, w, self._last_tiles))
            for tile_id in new.tolist():
                chunks += [_TILE_ID.pack(tile_id), frame.atlas.tile(tile_id).tobytes()]
            self._last_tiles = self._pos
            atlas.written[new] = True
        at = self._pos + sum(len(c) for c in chunks)
        rows, cols = index.shape
        chunks += [_FRAME.pack(b"F", atlas.number, rows, cols, self._last_tiles),
                   index.tobytes()]
        data = b"".join(chunks)
        with self._lock:
            self._pending.append(data)
        self._pos += len(data)
        return {"$frame": FRAMES_FILENAME, "at": at, "shape": list(frame.shape)}

    def flush(self) -> None:
        """Write the frames stored since the last flush, in order, in one write."""
        with self._lock:
            if self._pending and self._fd is not None:
                data = b"".join(self._pending)
                self._pending.clear()
                _write_all(self._fd, data)

    def close(self) -> None:
        if self._fd is not None:
            try:
                self.flush()
            finally:
                os.close(self._fd)
                self._fd = None


def open_fresh(path: Path, mode: int = 0o666) -> int:
    """A write fd of ``path``, which is empty: made if missing, truncated if it has content.

    The pool's recorder makes an episode's files ahead, empty (a new file costs ~0.15-1 ms
    on the development VM's ext4); opening one with O_TRUNC would not be free either:
    ext4 writes back at close a file truncated to zero (~0.2 ms).
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, mode)
    try:
        if os.fstat(fd).st_size:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        # A full disk: the episode waits for room where it is (DESIGN §12).
        view = view[DISK.retry(FRAMES_FILENAME, partial(os.write, fd, view)):]


# --- reading ------------------------------------------------------------------------------


def read_frame(path: Path, at: int) -> np.ndarray:
    """The (H, W, 3) uint8 pixels of the frame record at offset ``at`` of ``path``.

    Raises FrameFileError for a bad offset or a corrupt file, OSError if it cannot be read.
    """
    path = Path(path)
    with open(path, "rb") as fh:
        fd = fh.fileno()
        if os.pread(fd, len(MAGIC), 0) != MAGIC:
            raise FrameFileError(f"{path} is not a frames file")
        head = os.pread(fd, _FRAME.size, at) if at >= len(MAGIC) else b""
        if len(head) < _FRAME.size or head[:1] != b"F":
            raise FrameFileError(f"no frame record at offset {at} of {path}")
        _, atlas, rows, cols, tiles_at = _FRAME.unpack(head)
        if not 0 < rows * cols <= MAX_CELLS:
            raise FrameFileError(f"frame record at offset {at} has {rows}x{cols} cells")
        data = os.pread(fd, 2 * rows * cols, at + _FRAME.size)
        if len(data) < 2 * rows * cols:
            raise FrameFileError(f"frame record at offset {at} of {path} is truncated")
        index = np.frombuffer(data, dtype="<u2").reshape(rows, cols)
        stat = os.fstat(fd)
    tiles, present = _tiles(str(path), stat.st_ino, stat.st_mtime_ns, tiles_at, atlas)
    if int(index.max()) >= len(tiles) or not present[index].all():
        raise FrameFileError(f"{path} lacks tiles of the frame at offset {at}")
    return assemble(tiles, index)


@lru_cache(maxsize=64)
def _tiles(path: str, inode: int, mtime_ns: int, tiles_at: int,
           atlas: int) -> tuple[np.ndarray, np.ndarray]:
    """(tiles, which ids are present) of ``atlas`` in the chain back from ``tiles_at``;
    cached while the file (inode, mtime) is unchanged."""
    with open(path, "rb") as fh:
        return _follow_chain(path, fh.fileno(), tiles_at, atlas)


def _follow_chain(path: str, fd: int, tiles_at: int,
                  atlas: int) -> tuple[np.ndarray, np.ndarray]:
    found: dict[int, np.ndarray] = {}
    shape: tuple[int, int] | None = None
    pos, links = tiles_at, 0
    while pos:
        links += 1
        head = os.pread(fd, _TILES.size, pos)
        if len(head) < _TILES.size or head[:1] != b"T" or links > MAX_CHAIN:
            raise FrameFileError(f"{path}: no tiles record at offset {pos}")
        _, number, count, h, w, previous = _TILES.unpack(head)
        if number == atlas:
            if shape not in (None, (h, w)):
                raise FrameFileError(f"{path}: atlas {atlas} mixes tile shapes")
            shape, size = (h, w), _TILE_ID.size + h * w * 3
            body = os.pread(fd, count * size, pos + _TILES.size)
            if len(body) < count * size:
                raise FrameFileError(f"{path}: tiles record at offset {pos} is truncated")
            for k in range(count):
                (tile_id,) = _TILE_ID.unpack_from(body, k * size)
                found.setdefault(tile_id, np.frombuffer(
                    body, np.uint8, h * w * 3, k * size + _TILE_ID.size).reshape(h, w, 3))
        if previous >= pos:
            raise FrameFileError(f"{path}: tiles chain does not go back at offset {pos}")
        pos = previous
    if shape is None:
        raise FrameFileError(f"{path}: no tiles of atlas {atlas} before offset {tiles_at}")
    tiles = np.zeros((max(found) + 1, *shape, 3), np.uint8)
    present = np.zeros(len(tiles), bool)
    for tile_id, tile in found.items():
        tiles[tile_id] = tile
        present[tile_id] = True
    return tiles, present


def assemble(tiles: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The (rows*h, cols*w, 3) picture whose cell (r, c) is ``tiles[index[r, c]]``."""
    rows, cols = index.shape
    _, h, w, channels = tiles.shape
    return np.ascontiguousarray(
        tiles[index].transpose(0, 2, 1, 3, 4).reshape(rows * h, cols * w, channels))
