"""``GridFrames``: minigrid's top-down frame from the grid encoding and a tile atlas.

minigrid's ``get_frame(highlight=False, tile_size=t)`` walks every cell in Python, asks
``Grid.render_tile`` for the cell's tile (cached by the object's ``encode()``, the agent's
direction and the tile size) and copies it into the picture: ~2 ms for a 22x22 level,
plus a field-of-view computation that ``highlight=False`` does not use. The picture is
fully determined by each cell's ``(type, colour, state)`` encoding and the agent's cell
and direction, so here each distinct tile is rendered once, by minigrid's own
``Grid.render_tile``, into a :class:`~evaltui.engine.episode.tiles.TileAtlas`, and a frame is the
(height, width) array of tile ids: pixel for pixel the same picture (tests compare
them), for a few microseconds a step.

Tiles rendered by any earlier worker come from a disk cache (:mod:`.tilecache`): minigrid
takes ~4 ms to draw one, a fresh worker would spend 0.1-0.3 s on them.

The per-cell ids are recomputed only when the grid changes: a new grid (reset), a cell
holding another object (pickup, drop, a box opened), or an object whose encoding can
change in place (a door opening or being unlocked: objects whose class overrides
``encode``) reporting a new state. An object's type and colour are taken as constant,
as minigrid never changes them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaltui.engine.episode.tiles import TileAtlas, TiledFrame

from . import tilecache
from .grid import agent_cell
from .minigrid_import import Grid, WorldObj

EMPTY = (1, 0, 0)
"""The encoding of an empty cell (``OBJECT_TO_IDX["empty"]``)."""
NO_AGENT = -1


class GridFrames:
    """TiledFrames of a minigrid env at one tile size; one instance per env replica."""

    def __init__(self, tile_size: int, disk_cache: bool = True) -> None:
        if tile_size < 1:
            raise ValueError(f"tile_size must be >= 1, got {tile_size}")
        self.tile_size = tile_size
        self.disk_cache = disk_cache
        self.atlas = TileAtlas((tile_size, tile_size))
        self._ids: dict[tuple[int, int, int, int], int] = {}
        """(type, colour, state, agent direction or NO_AGENT) -> tile id."""
        for key, tile in tilecache.load_tiles(tile_size) if disk_cache else ():
            if key not in self._ids:
                self._ids[key] = self.atlas.add(tile)
        self._grid: Any = None
        self._cells: list[Any] = []
        """A copy of ``grid.grid`` when ``_base`` was built (compared by identity)."""
        self._keys: list[tuple[int, int, int]] = []
        self._base = np.zeros((0, 0), np.uint16)
        """Tile ids of the grid without the agent, (height, width)."""
        self._mutable: list[tuple[int, Any]] = []
        """(flat cell index, object) of objects whose encoding can change in place."""

    def frame(self, sim: Any) -> TiledFrame:
        """The frame of ``sim`` (an unwrapped MiniGridEnv) as ``get_frame`` would draw it."""
        grid = sim.grid
        cells = grid.grid
        if grid is not self._grid or cells != self._cells:
            self._rebuild(grid)
        else:
            for flat, obj in self._mutable:
                key = obj.encode()
                if key != self._keys[flat]:
                    self._keys[flat] = key
                    self._base.flat[flat] = self._tile(key, obj, NO_AGENT)
        index = self._base.copy()
        x, y = agent_cell(sim)
        flat = y * grid.width + x
        index[y, x] = self._tile(self._keys[flat], cells[flat], int(sim.agent_dir))
        return TiledFrame(self.atlas, index)

    def _rebuild(self, grid: Any) -> None:
        cells = list(grid.grid)
        keys = [EMPTY if obj is None else obj.encode() for obj in cells]
        ids = [self._tile(key, obj, NO_AGENT) for key, obj in zip(keys, cells, strict=True)]
        self._grid, self._cells, self._keys = grid, cells, keys
        self._base = np.array(ids, dtype=np.uint16).reshape(grid.height, grid.width)
        self._mutable = [(flat, obj) for flat, obj in enumerate(cells)
                         if obj is not None and type(obj).encode is not WorldObj.encode]

    def _tile(self, key: tuple[int, int, int], obj: Any, agent_dir: int) -> int:
        full = (key[0], key[1], key[2], agent_dir)
        tile_id = self._ids.get(full)
        if tile_id is None:
            # minigrid's own renderer, with the arguments Grid.render passes it.
            img = Grid.render_tile(obj, agent_dir=None if agent_dir == NO_AGENT else agent_dir,
                                   highlight=False, tile_size=self.tile_size)
            tile_id = self._ids[full] = self.atlas.add(img)
            if self.disk_cache:
                tilecache.save_tile(self.tile_size, full, img)
        return tile_id
