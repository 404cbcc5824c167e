"""Pure grid helpers for BabyAI "go to" missions: passability, BFS distance and path.

Distances count *moves* (forward steps that change the agent's cell); turns are free,
as in the position-based VLN metrics. A "go to X" mission is reached from any cell
orthogonally adjacent to an object matching X, so the BFS targets are those cells.
Goal cells are ``env.instrs.desc.obj_poss`` after reset (every object matching the
description). Functions only read ``env.grid``, ``env.width`` and ``env.height``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

Cell = tuple[int, int]

# Fixed neighbour order (east, south, west, north: minigrid's DIR_TO_VEC order) makes
# BFS, and so the tie-break between equally short paths, deterministic.
_NEIGHBOURS: tuple[Cell, ...] = ((1, 0), (0, 1), (-1, 0), (0, -1))


def agent_cell(env: Any) -> Cell:
    """The cell the agent of ``env`` (an unwrapped minigrid env) stands on."""
    return (int(env.agent_pos[0]), int(env.agent_pos[1]))


def passable(env: Any, x: int, y: int) -> bool:
    """Whether the agent can stand on cell (x, y) of ``env``'s current grid.

    Empty and overlappable cells are passable, and so are closed but unlocked doors:
    the agent opens them with ``toggle`` without moving, so they cost no extra move.
    Locked doors, walls and objects (balls, boxes, keys) block.
    """
    if not (0 <= x < env.width and 0 <= y < env.height):
        return False
    cell = env.grid.get(x, y)
    if cell is None or cell.can_overlap():
        return True
    return cell.type == "door" and not cell.is_locked


def goal_cells(env: Any) -> list[Cell]:
    """The cells of every object matching the current "go to" mission's description."""
    return [(int(x), int(y)) for x, y in env.instrs.desc.obj_poss]


def _targets(goals: Iterable[Sequence[int]]) -> set[Cell]:
    targets: set[Cell] = set()
    for gx, gy in goals:
        for dx, dy in _NEIGHBOURS:
            targets.add((int(gx) + dx, int(gy) + dy))
    return targets


def _bfs(env: Any, start: Sequence[int], goals: Iterable[Sequence[int]]) -> list[Cell] | None:
    """Shortest path from ``start`` to the nearest cell adjacent to a goal, or None."""
    origin: Cell = (int(start[0]), int(start[1]))
    targets = _targets(goals)
    parent: dict[Cell, Cell | None] = {origin: None}
    queue: deque[Cell] = deque([origin])
    while queue:
        cell = queue.popleft()
        if cell in targets:
            path: list[Cell] = []
            node: Cell | None = cell
            while node is not None:
                path.append(node)
                node = parent[node]
            return path[::-1]
        for dx, dy in _NEIGHBOURS:
            nxt = (cell[0] + dx, cell[1] + dy)
            if nxt not in parent and passable(env, *nxt):
                parent[nxt] = cell
                queue.append(nxt)
    return None


def geodesic_distance(env: Any, start: Sequence[int], goals: Iterable[Sequence[int]]) -> float:
    """Moves from ``start`` to the nearest cell adjacent to any goal (0 if adjacent).

    ``math.inf`` when no such cell is reachable on the current grid.
    """
    path = _bfs(env, start, goals)
    return math.inf if path is None else float(len(path) - 1)


def shortest_path(env: Any, start: Sequence[int], goals: Iterable[Sequence[int]]) -> list[Cell]:
    """The cells from ``start`` to the nearest goal-adjacent cell, both inclusive.

    Ties are broken deterministically by the fixed neighbour order. Raises
    ``ValueError`` if no goal-adjacent cell is reachable.
    """
    goals = list(goals)
    path = _bfs(env, start, goals)
    if path is None:
        raise ValueError(f"no cell adjacent to goals {goals} is reachable from {tuple(start)}")
    return path
