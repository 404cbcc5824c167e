"""FrozenLake (gymnasium's toy-text env) as an evaltui env nodeset: the worked example of
docs/own-env.md.

Each dataset episode carries its own 4x4 map (``desc``), so the reference path and the
geodesic distance of the metrics are the map's shortest path. Positions are grid cells
``(column, row)``: the same coordinates as the dataset's ``reference_path``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import gymnasium as gym
from pydantic import Field

from evaltui.engine.nodes import EnvNodeSet, Trajectory, node

Cell = tuple[int, int]
MOVES = {0: (-1, 0), 1: (0, 1), 2: (1, 0), 3: (0, -1)}
"""FrozenLake's actions: 0 left, 1 down, 2 right, 3 up, as (d_column, d_row)."""


def goal_cell(desc: Sequence[str]) -> Cell:
    return next((c, r) for r, row in enumerate(desc) for c, ch in enumerate(row) if ch == "G")


def cells_to_goal(desc: Sequence[str]) -> dict[Cell, int]:
    """Steps from every cell that reaches the goal ``G`` to it (a BFS that never enters a
    hole ``H``): the geodesic distance of the map."""
    goal = goal_cell(desc)
    dist, todo = {goal: 0}, deque([goal])
    while todo:
        c, r = todo.popleft()
        for dc, dr in MOVES.values():
            nc, nr = c + dc, r + dr
            if 0 <= nr < len(desc) and 0 <= nc < len(desc[0]) and desc[nr][nc] != "H" \
                    and (nc, nr) not in dist:
                dist[(nc, nr)] = dist[(c, r)] + 1
                todo.append((nc, nr))
    return dist


class FrozenLakeEnv(EnvNodeSet):
    """Walk from ``S`` to ``G`` without falling into a hole ``H``.

    Args:
        slippery: gymnasium's ``is_slippery`` (a move may slide sideways).
        max_steps: the env's own step limit (FrozenLake-v1's is 100).
    """

    success_distance = 0.5  # nDTW's d_th, in cells: success means *on* the goal cell

    def __init__(self, slippery: bool = False,
                 max_steps: Annotated[int, Field(ge=1, le=10_000)] = 100) -> None:
        self.slippery = slippery
        self.max_steps = max_steps
        self._env: Any = None
        self._desc: list[str] = []
        self._positions: list[Cell] = []
        self._steps = 0
        self._success = False
        self._fell = False

    @classmethod
    def step_limit(cls, episode: Mapping[str, Any]) -> int | None:
        return 100  # the default max_steps: the run's step budget defaults to it

    def set_episode(self, episode: Mapping[str, Any]) -> dict[str, Any]:
        """Build the episode's map and reset; the loop ports ``@obs`` start here."""
        if self._env is not None:
            self._env.close()
        self._desc = list(episode["desc"])
        self._env = gym.make("FrozenLake-v1", desc=self._desc, is_slippery=self.slippery,
                             max_episode_steps=self.max_steps)
        state, _ = self._env.reset(seed=int(episode.get("seed", 0)))
        self._positions = [self._cell(state)]
        self._steps, self._success, self._fell = 0, False, False
        return {"obs": {"cell": self._positions[0], "desc": self._desc}}

    @node(inputs=("action",), outputs=("obs", "done", "reward"))
    def step(self, action: int) -> dict[str, Any]:
        """One move; ``done`` ends the episode (goal, hole, or the env's time limit)."""
        state, reward, terminated, truncated, _ = self._env.step(int(action))
        self._steps += 1
        cell = self._cell(state)
        if cell != self._positions[-1]:  # positions: appended when they change
            self._positions.append(cell)
        self._success = bool(terminated and reward > 0)
        self._fell = bool(terminated and reward == 0)
        return {"obs": {"cell": cell, "desc": self._desc}, "done": terminated or truncated,
                "reward": float(reward)}

    def trajectory(self) -> Trajectory:
        """What the metrics are computed from when the episode ends."""
        final = self._positions[-1]
        goal = goal_cell(self._desc)
        # nav_error: the geodesic distance still to go; from a hole, the grid distance
        left = cells_to_goal(self._desc).get(
            final, abs(final[0] - goal[0]) + abs(final[1] - goal[1]))
        return Trajectory(
            positions=[(float(c), float(r)) for c, r in self._positions],
            success=self._success, nav_error=float(left),
            extra={"steps": float(self._steps), "fell_in_hole": float(self._fell)})

    def close(self) -> None:
        if self._env is not None:
            self._env.close()

    def _cell(self, state: int) -> Cell:
        ncol = len(self._desc[0])
        return int(state) % ncol, int(state) // ncol
