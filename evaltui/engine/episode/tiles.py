"""Tiled frames: a picture made of equal tiles, stored as one tile id per cell.

An env whose top-down view is a grid of a few distinct tiles (minigrid) renders each
distinct tile once into a :class:`TileAtlas` and emits, per step, only the
``(rows, cols)`` array of tile ids: a :class:`TiledFrame`. Its pixels are assembled on
demand by numpy indexing; the ExecutionLogger stores the ids (two bytes a cell) and each
tile once per episode (:mod:`evaltui.rundir.framefile`) instead of encoding a PNG per step.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from evaltui.engine.nodes import Frame
from evaltui.rundir.framefile import assemble

MAX_TILES = 1 << 16
"""Tile ids are stored as uint16."""

_uids = itertools.count(1)


class TileAtlas:
    """Distinct tiles of equal shape (h, w, 3 uint8), each with a stable id (0, 1, ...).

    Tiles are only ever added, so a frame built against the atlas stays valid as it grows.
    """

    def __init__(self, tile_shape: tuple[int, int]) -> None:
        self.tile_shape = (int(tile_shape[0]), int(tile_shape[1]))
        self.uid = next(_uids)
        """Tells atlases apart within a process (the logger writes each one's tiles once)."""
        self._tiles: list[np.ndarray] = []
        self._array: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._tiles)

    def add(self, tile: Any) -> int:
        """Store a copy of ``tile``; returns its id."""
        arr = np.array(tile, dtype=np.uint8, copy=True)
        if arr.shape != (*self.tile_shape, 3):
            raise ValueError(f"tile of shape {arr.shape}, atlas holds {(*self.tile_shape, 3)}")
        if len(self._tiles) >= MAX_TILES:
            raise ValueError(f"atlas is full ({MAX_TILES} tiles)")
        arr.flags.writeable = False
        self._tiles.append(arr)
        self._array = None
        return len(self._tiles) - 1

    def tile(self, tile_id: int) -> np.ndarray:
        return self._tiles[tile_id]

    @property
    def array(self) -> np.ndarray:
        """All tiles stacked: (n, h, w, 3)."""
        if self._array is None or len(self._array) != len(self._tiles):
            self._array = np.stack(self._tiles) if self._tiles else \
                np.zeros((0, *self.tile_shape, 3), np.uint8)
        return self._array


class TiledFrame(Frame):
    """A Frame given as tile ids over an atlas; ``pixels`` are assembled when first read.

    Crosses process boundaries as a plain :class:`~evaltui.engine.nodes.Frame` (its
    pixels), so a remote node receiving it never needs the atlas.
    """

    atlas: TileAtlas
    index: np.ndarray
    """(rows, cols) uint16 tile ids."""
    _pixels: np.ndarray | None

    def __init__(self, atlas: TileAtlas, index: np.ndarray) -> None:
        # Frame is a frozen dataclass: set the attributes as its own __init__ would.
        object.__setattr__(self, "atlas", atlas)
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "_pixels", None)

    @property
    def shape(self) -> tuple[int, int, int]:
        rows, cols = self.index.shape
        return (rows * self.atlas.tile_shape[0], cols * self.atlas.tile_shape[1], 3)

    @property
    def pixels(self) -> np.ndarray:  # type: ignore[override]  # computed, not stored
        if self._pixels is None:
            object.__setattr__(self, "_pixels", assemble(self.atlas.array, self.index))
        assert self._pixels is not None
        return self._pixels

    def __repr__(self) -> str:
        rows, cols = self.index.shape
        return f"TiledFrame({rows}x{cols} tiles of {self.atlas.tile_shape}, atlas {self.atlas.uid})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Frame, (self.pixels,))
