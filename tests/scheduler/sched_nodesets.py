"""Nodesets for scheduler tests, imported by run subprocesses (``active_workspace_dir``).

``VramPolicy`` makes "measured usage" real: it charges the fake GPU the scheduler gave
its run (EVALTUI_FAKE_GPU_INDEX) while it lives, exactly as a model would hold VRAM.
``StubbornPolicy`` leaves a SIGTERM-ignoring process in the run's process group, so a
cancel test can check that nothing of the run survives.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaltui.engine.nodes import EnvNodeSet, NodeSet, Trajectory, node
from evaltui.gpu import fakegpu


class LineEnv(EnvNodeSet):
    """Walk from 0 to ``episode['goal']`` on a line; ``done`` at the goal."""

    def __init__(self) -> None:
        self.pos = 0
        self.goal = 0
        self.positions: list[tuple[float, ...]] = []

    def set_episode(self, episode: Mapping[str, Any]) -> dict[str, Any]:
        self.pos, self.goal = 0, int(episode["goal"])
        self.positions = [(0.0, 0.0)]
        return {"obs": {"pos": 0, "goal": self.goal}}

    @node(inputs=("action",), outputs=("obs", "done"))
    def step(self, action: int) -> dict[str, Any]:
        self.pos += int(action)
        self.positions.append((float(self.pos), 0.0))
        return {"obs": {"pos": self.pos, "goal": self.goal}, "done": self.pos == self.goal}

    def trajectory(self) -> Trajectory:
        return Trajectory(positions=self.positions, success=self.pos == self.goal,
                          nav_error=float(abs(self.goal - self.pos)))


class VramPolicy(NodeSet):
    """Steps towards the goal, sleeping ``sleep_sec`` a step, holding ``vram_mb`` fake MiB."""

    def __init__(self, vram_mb: int = 0, sleep_sec: float = 0.0, env_file: str = "") -> None:
        self.vram_mb = vram_mb
        self.sleep_sec = sleep_sec
        if env_file:  # lets a test see what the scheduler put in the run's environment
            Path(env_file).write_text(
                f"{os.environ.get('CUDA_VISIBLE_DEVICES')}\n"
                f"{os.environ.get(fakegpu.FAKE_GPU_INDEX_ENV)}\n")
        if vram_mb:
            fakegpu.charge(vram_mb)

    @node(inputs=("obs",), outputs=("action",))
    def act(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        if self.sleep_sec:
            time.sleep(self.sleep_sec)
        return {"action": 1 if obs["goal"] > obs["pos"] else -1}

    def close(self) -> None:
        if self.vram_mb:
            fakegpu.release()


class StubbornPolicy(VramPolicy):
    """A VramPolicy that also starts a child ignoring SIGTERM (its PID goes to ``pid_file``)."""

    def __init__(self, pid_file: str, sleep_sec: float = 0.2) -> None:
        super().__init__(sleep_sec=sleep_sec)
        self.child = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 600 & wait"])
        Path(pid_file).write_text(str(self.child.pid))
