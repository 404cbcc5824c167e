"""``BabyAIEnv``: the BabyAI env nodeset (DESIGN §9), replicated once per worker.

Loop ports: ``obs`` (the agent's 7x7x3 partial view, direction and mission), ``sim`` (the
unwrapped minigrid env, for privileged in-process policies such as the expert bot) and
``frame`` (a full top-down render, every ``frame_stride`` steps: a TiledFrame, pixel for
pixel minigrid's ``get_frame(highlight=False)``, see :mod:`.frames`). Success is minigrid's
own: with done actions the episode succeeds only when the agent emits ``done`` while
facing a goal object (:mod:`.minigrid_import`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from evaltui.engine.episode.tiles import TiledFrame
from evaltui.engine.nodes import EnvNodeSet, Trajectory, node

from .frames import GridFrames
from .grid import Cell, agent_cell, geodesic_distance, goal_cells
from .minigrid_import import MINIGRID_VERSION, make_env, quiet_stdout

log = logging.getLogger(__name__)

NUM_ACTIONS = 7  # minigrid: left, right, forward, pickup, drop, toggle, done


class BabyAIEnv(EnvNodeSet):
    """One BabyAI simulator; gym envs are made lazily and cached per env id.

    Args:
        frame_stride: 0 = no frames; otherwise a Frame at reset and every
            ``frame_stride``-th step.
        tile_size: pixels per grid cell of the frames.
        sim_latency_ms: sleep before every step, to emulate a slow simulator.
        check_mission: check at reset that the seed still yields the manifest's mission.
    """

    success_distance = 1.0

    # The bounds are checked at spec check (engine.paramtypes), before a run dir exists.
    def __init__(self, frame_stride: Annotated[int, Field(ge=0)] = 1,
                 tile_size: Annotated[int, Field(ge=1, le=64)] = 8,
                 sim_latency_ms: Annotated[float, Field(ge=0)] = 0.0,
                 check_mission: bool = True) -> None:
        if frame_stride < 0:
            raise ValueError(f"frame_stride must be >= 0, got {frame_stride}")
        if tile_size < 1:
            raise ValueError(f"tile_size must be >= 1, got {tile_size}")
        if sim_latency_ms < 0:
            raise ValueError(f"sim_latency_ms must be >= 0, got {sim_latency_ms}")
        self.frame_stride = frame_stride
        self.tile_size = tile_size
        self.sim_latency_ms = sim_latency_ms
        self.check_mission = check_mission
        self._frames = GridFrames(tile_size) if frame_stride else None
        self._envs: dict[str, Any] = {}
        self._env: Any = None
        self._positions: list[Cell] = []
        self._steps = 0
        self._success = False
        self._done = False
        #: What minigrid printed during the last reset (e.g. "Sampling rejected: ...").
        self.last_reset_output = ""

    def set_episode(self, episode: Mapping[str, Any]) -> dict[str, Any]:
        """Reset to ``episode`` (a manifest record); return the initial loop ports."""
        env_id = episode["env_id"]
        if env_id not in self._envs:
            self._envs[env_id] = make_env(env_id)
        self._env = self._envs[env_id]
        with quiet_stdout() as captured:
            obs, _ = self._env.reset(seed=int(episode["seed"]))
        self.last_reset_output = captured.text
        if captured.text:
            log.debug("%s reset output: %s", episode.get("episode_id"), captured.text.strip())
        sim = self._env.unwrapped
        if self.check_mission:
            self._check(episode, sim)
        self._positions = [agent_cell(sim)]
        self._steps = 0
        self._success = False
        self._done = False
        return {"obs": self._obs(obs), "sim": sim,
                "frame": self._frame() if self.frame_stride else None}

    @classmethod
    def step_limit(cls, episode: Mapping[str, Any]) -> int | None:
        """BabyAI's own ``max_steps`` of the episode's level (the manifest records it)."""
        limit = episode.get("max_steps")
        return int(limit) if limit is not None else None

    def _check(self, episode: Mapping[str, Any], sim: Any) -> None:
        # A different minigrid version may generate another level for the same seed;
        # scoring it against the manifest's reference path would be silently wrong.
        where = f"episode {episode.get('episode_id')!r} (minigrid {MINIGRID_VERSION})"
        if sim.mission != episode["instruction"]:
            raise ValueError(f"{where}: seed {episode['seed']} yields mission "
                             f"{sim.mission!r}, manifest says {episode['instruction']!r}")
        limit = episode.get("max_steps")
        if limit is not None and int(limit) != sim.max_steps:
            raise ValueError(f"{where}: seed {episode['seed']} has max_steps {sim.max_steps}, "
                             f"manifest says {limit}")
        start = episode.get("start")
        if start is not None and list(agent_cell(sim)) != [int(v) for v in start]:
            raise ValueError(f"{where}: seed {episode['seed']} starts at "
                             f"{list(agent_cell(sim))}, manifest says {list(start)}")

    @node(inputs=("action",), outputs=("obs", "sim", "frame", "done", "reward"))
    def step(self, action: Any) -> dict[str, Any]:
        """Apply one action (an int in 0..6) and return the new loop ports."""
        if self._env is None:
            raise RuntimeError("step() called before set_episode()")
        if self._done:
            raise RuntimeError("step() called after the episode ended")
        try:
            act = int(action)
            valid = act == action and 0 <= act < NUM_ACTIONS
        except (TypeError, ValueError):
            valid = False
        if not valid:
            raise ValueError(f"action must be an int in 0..{NUM_ACTIONS - 1}, got {action!r}")
        if self.sim_latency_ms:
            time.sleep(self.sim_latency_ms / 1000.0)
        obs, reward, terminated, truncated, _ = self._env.step(act)
        sim = self._env.unwrapped
        self._steps += 1
        pos = agent_cell(sim)
        if pos != self._positions[-1]:
            self._positions.append(pos)
        self._success = bool(terminated and reward > 0)
        self._done = bool(terminated or truncated)
        emit = self.frame_stride and self._steps % self.frame_stride == 0
        return {"obs": self._obs(obs), "sim": sim, "frame": self._frame() if emit else None,
                "done": self._done, "reward": float(reward)}

    def trajectory(self) -> Trajectory:
        """Positions so far, success, and the geodesic distance left on the current grid."""
        if self._env is None:
            raise RuntimeError("trajectory() called before set_episode()")
        sim = self._env.unwrapped
        final = self._positions[-1]
        goals = goal_cells(sim)
        nav_error = geodesic_distance(sim, final, goals)
        if math.isinf(nav_error):
            # The agent walled a goal off (e.g. dropped an object in a doorway); keep
            # the metric finite with the Manhattan distance to the nearest goal-adjacent cell.
            nav_error = float(min(max(abs(final[0] - gx) + abs(final[1] - gy) - 1, 0)
                                  for gx, gy in goals))
        return Trajectory(positions=list(self._positions), success=self._success,
                          nav_error=nav_error, extra={"steps": float(self._steps)})

    def close(self) -> None:
        """Close every cached gym env."""
        for env in self._envs.values():
            env.close()
        self._envs.clear()
        self._env = None

    @staticmethod
    def _obs(obs: Mapping[str, Any]) -> dict[str, Any]:
        return {"image": np.asarray(obs["image"], dtype=np.uint8),
                "direction": int(obs["direction"]), "mission": str(obs["mission"])}

    def _frame(self) -> TiledFrame:
        assert self._frames is not None  # frame_stride > 0
        return self._frames.frame(self._env.unwrapped)
