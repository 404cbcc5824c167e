"""Nodesets that hold real device memory, for the gpu tests (imported by run subprocesses
and nodeset hosts through ``active_workspace_dir``).

Each allocates ``vram_mb`` through the CUDA driver API when it is constructed, on the GPU
the scheduler gave its process (CUDA device 0 under the CUDA_VISIBLE_DEVICES the
scheduler set), and frees it on close: the memory NVML then measures is real.
``HoldingLineEnv`` is a replicated env (one allocation per worker), ``HoldingPolicy`` an
inline or shared policy.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from evaltui.engine.nodes import EnvNodeSet, NodeSet, Trajectory, node
from evaltui.gpu.cudadriver import DeviceMemory


def hold_on_assigned_gpu(vram_mb: int) -> DeviceMemory | None:
    """``vram_mb`` MiB on the GPU this process was placed on; None for 0 MiB."""
    if vram_mb <= 0:
        return None
    if not os.environ.get("CUDA_VISIBLE_DEVICES"):
        # Without the scheduler's placement CUDA would pick any GPU (or all are hidden):
        # the memory would not be where the reservation is.
        raise RuntimeError("CUDA_VISIBLE_DEVICES is not set: this nodeset allocates only on "
                           "a GPU the scheduler assigned to its process")
    memory = DeviceMemory(0)
    try:
        memory.alloc(vram_mb)
    except BaseException:
        memory.close()
        raise
    return memory


class HoldingLineEnv(EnvNodeSet):
    """Walk from 0 to ``episode['goal']`` on a line, holding ``vram_mb`` MiB per replica."""

    def __init__(self, vram_mb: int = 0) -> None:
        self.memory = hold_on_assigned_gpu(vram_mb)
        self.pos = self.goal = 0
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

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()


class HoldingPolicy(NodeSet):
    """Steps towards the goal, sleeping ``sleep_sec`` a step, holding ``vram_mb`` MiB."""

    def __init__(self, vram_mb: int = 0, sleep_sec: float = 0.0, tag: str = "") -> None:
        # ``tag`` only makes otherwise equal nodesets distinct for calibration.
        self.sleep_sec = sleep_sec
        self.memory = hold_on_assigned_gpu(vram_mb)

    @node(inputs=("obs",), outputs=("action",))
    def act(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        if self.sleep_sec:
            time.sleep(self.sleep_sec)
        return {"action": 1 if obs["goal"] > obs["pos"] else -1}

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
