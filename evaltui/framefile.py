"""An episode's tiled frames on disk: ``assets/frames.bin`` and ``assets/tiles.bin``.

A :class:`~evaltui.engine.tiles.TiledFrame` is stored as its tile ids, and each tile the
episode uses once, so a frame costs two bytes a grid cell and no image encoding. Both
files are append-only, little-endian, and start with an 8-byte magic:

- ``tiles.bin`` (``EVTTILE1``): records ``<I atlas, I tile_id, H height, H width>`` then
  ``height * width * 3`` RGB bytes.
- ``frames.bin`` (``EVTFRAM1``): records ``<I atlas, H rows, H cols>`` then
  ``rows * cols`` uint16 tile ids; cell (r, c) of the picture is tile ``ids[r, c]`` of
  that atlas.

log.jsonl refers to a frame as ``{"$frame": "assets/frames.bin", "at": <byte offset of
its record>, "shape": [H, W, 3]}``. The writer uses unbuffered writes, a frame's new
tiles before the frame and the frame before the log line that refers to it, so a process
killed at any point leaves every logged reference resolvable. This module depends on
numpy only: the run's workers write it and the replay viewer reads it.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

FRAMES_FILENAME = "frames.bin"
TILES_FILENAME = "tiles.bin"
FRAMES_MAGIC = b"EVTFRAM1"
TILES_MAGIC = b"EVTTILE1"
_TILE_HEAD = struct.Struct("<IIHH")
_FRAME_HEAD = struct.Struct("<IHH")
MAX_CELLS = 1 << 20
"""A frame record claiming more cells than this is corrupt (a 1024x1024 grid)."""


class FrameFileError(OSError):
    """A frames.bin / tiles.bin record is missing, truncated or inconsistent (an OSError,
    as PIL's UnidentifiedImageError is: callers handle an unreadable frame as one)."""


@dataclass
class _Atlas:
    number: int
    written: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))


class FrameFileWriter:
    """Appends the tiled frames of one episode to ``assets_dir`` (created at the first)."""

    def __init__(self, assets_dir: Path) -> None:
        self.assets_dir = Path(assets_dir)
        self._frames_fd: int | None = None
        self._tiles_fd: int | None = None
        self._frames_pos = 0
        self._atlases: dict[int, _Atlas] = {}

    def write(self, frame: Any) -> dict[str, Any]:
        """Store a TiledFrame; returns its log.jsonl stand-in."""
        if self._frames_fd is None:
            self._open()
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
        if new.size:
            h, w = frame.atlas.tile_shape
            chunks = []
            for tile_id in new.tolist():
                chunks.append(_TILE_HEAD.pack(atlas.number, tile_id, h, w))
                chunks.append(frame.atlas.tile(tile_id).tobytes())
            _write_all(self._tiles_fd, b"".join(chunks))
            atlas.written[new] = True
        rows, cols = index.shape
        record = _FRAME_HEAD.pack(atlas.number, rows, cols) + index.tobytes()
        at = self._frames_pos
        _write_all(self._frames_fd, record)
        self._frames_pos += len(record)
        return {"$frame": f"{self.assets_dir.name}/{FRAMES_FILENAME}", "at": at,
                "shape": list(frame.shape)}

    def close(self) -> None:
        for fd in (self._frames_fd, self._tiles_fd):
            if fd is not None:
                os.close(fd)
        self._frames_fd = self._tiles_fd = None

    def _open(self) -> None:
        self.assets_dir.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC  # a retried episode starts afresh
        self._tiles_fd = os.open(self.assets_dir / TILES_FILENAME, flags, 0o644)
        _write_all(self._tiles_fd, TILES_MAGIC)
        self._frames_fd = os.open(self.assets_dir / FRAMES_FILENAME, flags, 0o644)
        _write_all(self._frames_fd, FRAMES_MAGIC)
        self._frames_pos = len(FRAMES_MAGIC)


def _write_all(fd: int | None, data: bytes) -> None:
    assert fd is not None
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# --- reading ------------------------------------------------------------------------------


def read_frame(frames_path: Path, at: int) -> np.ndarray:
    """The (H, W, 3) uint8 pixels of the frame record at offset ``at`` of ``frames_path``.

    The tiles come from ``tiles.bin`` in the same directory. Raises FrameFileError for a
    bad offset or a corrupt file, OSError if a file cannot be read.
    """
    frames_path = Path(frames_path)
    with open(frames_path, "rb") as fh:
        if fh.read(len(FRAMES_MAGIC)) != FRAMES_MAGIC:
            raise FrameFileError(f"{frames_path} is not a frames file")
        if at < len(FRAMES_MAGIC):
            raise FrameFileError(f"no frame record at offset {at}")
        head = os.pread(fh.fileno(), _FRAME_HEAD.size, at)
        if len(head) < _FRAME_HEAD.size:
            raise FrameFileError(f"no frame record at offset {at} of {frames_path}")
        atlas, rows, cols = _FRAME_HEAD.unpack(head)
        if not 0 < rows * cols <= MAX_CELLS:
            raise FrameFileError(f"frame record at offset {at} has {rows}x{cols} cells")
        data = os.pread(fh.fileno(), 2 * rows * cols, at + _FRAME_HEAD.size)
    if len(data) < 2 * rows * cols:
        raise FrameFileError(f"frame record at offset {at} of {frames_path} is truncated")
    index = np.frombuffer(data, dtype="<u2").reshape(rows, cols)
    tiles_path = frames_path.with_name(TILES_FILENAME)
    stat = tiles_path.stat()
    found = _read_tiles(str(tiles_path), stat.st_size, stat.st_mtime_ns).get(atlas)
    if found is None or int(index.max()) >= len(found[0]) or not found[1][index].all():
        raise FrameFileError(f"{tiles_path} lacks tiles of the frame at offset {at}")
    return assemble(found[0], index)


def assemble(tiles: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The (rows*h, cols*w, 3) picture whose cell (r, c) is ``tiles[index[r, c]]``."""
    rows, cols = index.shape
    _, h, w, channels = tiles.shape
    return np.ascontiguousarray(
        tiles[index].transpose(0, 2, 1, 3, 4).reshape(rows * h, cols * w, channels))


@lru_cache(maxsize=16)
def _read_tiles(path: str, size: int, mtime_ns: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """atlas -> (tiles (n, h, w, 3), which ids are present); cached until the file changes."""
    raw = Path(path).read_bytes()
    if raw[:len(TILES_MAGIC)] != TILES_MAGIC:
        raise FrameFileError(f"{path} is not a tiles file")
    found: dict[int, dict[int, np.ndarray]] = {}
    pos = len(TILES_MAGIC)
    while pos + _TILE_HEAD.size <= len(raw):
        atlas, tile_id, h, w = _TILE_HEAD.unpack_from(raw, pos)
        pos += _TILE_HEAD.size
        n = h * w * 3
        if pos + n > len(raw):
            break  # a writer mid-append: the frame that needs this tile is not logged yet
        found.setdefault(atlas, {})[tile_id] = np.frombuffer(raw, np.uint8, n, pos).reshape(
            h, w, 3)
        pos += n
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for atlas, by_id in found.items():
        shapes = {t.shape for t in by_id.values()}
        if len(shapes) != 1:
            raise FrameFileError(f"{path}: atlas {atlas} mixes tile shapes {sorted(shapes)}")
        (shape,) = shapes
        tiles = np.zeros((max(by_id) + 1, *shape), np.uint8)
        present = np.zeros(len(tiles), bool)
        for tile_id, tile in by_id.items():
            tiles[tile_id] = tile
            present[tile_id] = True
        out[atlas] = (tiles, present)
    return out
