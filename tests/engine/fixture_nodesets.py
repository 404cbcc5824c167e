"""Small nodesets for engine tests: a deterministic corridor env and faulty/slow policies.

Imported by the run subprocess through the spec's ``active_workspace_dir`` (this dir).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from evaltui.engine.nodes import EnvNodeSet, NodeSet, Trajectory, node


class CorridorEnv(EnvNodeSet):
    """The agent walks a 1-D corridor from 0 towards ``episode['goal']``; `done` at the goal."""

    def __init__(self, step_sleep_sec: float = 0.0, hang_reset_on_goal: int | None = None
                 ) -> None:
        self.step_sleep_sec = step_sleep_sec
        self.hang_reset_on_goal = hang_reset_on_goal
        self.pos = 0
        self.goal = 0
        self.positions: list[tuple[float, ...]] = []

    def set_episode(self, episode: Mapping[str, Any]) -> dict[str, Any]:
        self.pos, self.goal = 0, int(episode["goal"])
        if self.goal == self.hang_reset_on_goal:
            time.sleep(120)  # a scene load that never ends
        self.positions = [(0.0, 0.0)]
        return {"obs": {"pos": self.pos, "goal": self.goal}}

    @node(inputs=("action",), outputs=("obs", "done"))
    def step(self, action: int) -> dict[str, Any]:
        if self.step_sleep_sec:
            time.sleep(self.step_sleep_sec)
        self.pos += int(action)
        if self.positions[-1] != (float(self.pos), 0.0):
            self.positions.append((float(self.pos), 0.0))
        return {"obs": {"pos": self.pos, "goal": self.goal}, "done": self.pos == self.goal}

    def trajectory(self) -> Trajectory:
        return Trajectory(positions=self.positions, success=self.pos == self.goal,
                          nav_error=float(abs(self.goal - self.pos)))


class StepPolicy(NodeSet):
    """Steps towards the goal; raises in the episode whose ``goal`` is ``fail_on_goal``,
    and blocks (at its second step) in the one whose goal is ``hang_on_goal``."""

    def __init__(self, fail_on_goal: int | None = None, sleep_sec: float = 0.0,
                 hang_on_goal: int | None = None) -> None:
        self.fail_on_goal = fail_on_goal
        self.sleep_sec = sleep_sec
        self.hang_on_goal = hang_on_goal

    @node(inputs=("obs",), outputs=("action",))
    def act(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        if obs["goal"] == self.fail_on_goal:
            raise RuntimeError(f"policy exploded on goal {obs['goal']}")
        if self.sleep_sec:
            time.sleep(self.sleep_sec)
        if obs["goal"] == self.hang_on_goal and obs["pos"] == 1:
            time.sleep(60)  # blocks far past any step budget (the worker gets killed)
        return {"action": 1 if obs["goal"] > obs["pos"] else -1}


class HungryPolicy(StepPolicy):
    """StepPolicy that fills ``mb`` MiB of memory in the episode whose goal is
    ``hungry_on_goal`` (every page touched): a memory limit's OOM killer ends its worker."""

    def __init__(self, hungry_on_goal: int, mb: int = 4096) -> None:
        super().__init__()
        self.hungry_on_goal = hungry_on_goal
        self.mb = mb

    @node(inputs=("obs",), outputs=("action",))
    def act(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        if obs["goal"] == self.hungry_on_goal:
            import numpy as np

            self.held = np.ones(self.mb << 20, dtype=np.uint8)
        return super().act(obs)


def corridor_graph(**policy_params: Any) -> dict[str, Any]:
    return {
        "name": "corridor",
        "nodesets": {
            "env": {"impl": "fixture_nodesets:CorridorEnv", "parallelism": "replicated"},
            "policy": {"impl": "fixture_nodesets:StepPolicy", "parallelism": "inline",
                       "params": policy_params},
        },
        "nodes": {"policy": {"nodeset": "policy", "op": "act"},
                  "env_step": {"nodeset": "env", "op": "step"}},
        "edges": [["@obs", "policy.obs"], ["policy.action", "env_step.action"]],
        "loop": {"env": "env", "step": "env_step"},
    }
