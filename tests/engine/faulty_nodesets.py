"""Tiny nodesets for the pool, hosting and cancel tests: deterministic, and faulty on cue.

Reached by the run's workers through ``active_workspace_dir`` (this directory). They
leave traces in ``trace_dir`` (which process ran which episode) so that tests can find
the PID to kill and check which process did what, without any mock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from evaltui.engine.nodes import EnvNodeSet, NodeSet, Trajectory, node


def write_dataset(path: Path, lengths: list[int]) -> Path:
    """A JSONL dataset of walks: episode i takes ``lengths[i]`` steps along x."""
    import json

    with path.open("w") as fh:
        for i, n in enumerate(lengths):
            fh.write(json.dumps({
                "episode_id": f"walk-{i:04d}", "scene_id": f"line-{n}", "instruction": f"walk {n}",
                "length": n, "reference_path": [[x, 0] for x in range(n + 1)],
                "geodesic_distance": float(n)}) + "\n")
    return path


def _trace(trace_dir: str, kind: str, episode_id: str) -> Path | None:
    if not trace_dir:
        return None
    path = Path(trace_dir) / f"{kind}.{episode_id}.{os.getpid()}.{time.monotonic_ns()}"
    path.touch()
    return path


class WalkEnv(EnvNodeSet):
    """Walks ``length`` steps of the action's size along x; faults on cue by episode id.

    Args:
        trace_dir: where each set_episode leaves ``start.{episode_id}.{pid}.{ns}``.
        raise_on: episode ids whose 2nd step raises.
        hang_once: episode ids whose 2nd step blocks (a long sleep) the first time only
            (a ``hang.{episode_id}.{pid}`` file marks it), so that a retry succeeds.
        slow: episode id -> seconds its first step sleeps.
        step_sleep_ms: sleep at every step (a slow simulator).
        init_error: if set, the constructor raises with it (a worker that cannot start).
        together: set_episode waits (up to 60 s) until this many processes have started an
            episode, so that every one of that many workers runs one however late it starts.
    """

    def __init__(self, trace_dir: str = "", raise_on: tuple[str, ...] = (),
                 hang_once: tuple[str, ...] = (), slow: Mapping[str, float] | None = None,
                 step_sleep_ms: float = 0.0, init_error: str = "", together: int = 0) -> None:
        if init_error:
            raise RuntimeError(init_error)
        self.trace_dir = trace_dir
        self.raise_on = set(raise_on)
        self.hang_once = set(hang_once)
        self.slow = dict(slow or {})
        self.step_sleep_ms = step_sleep_ms
        self.together = together
        self._episode: Mapping[str, Any] = {}
        self._x = 0
        self._steps = 0
        self._positions: list[tuple[float, ...]] = []

    def set_episode(self, episode: Mapping[str, Any]) -> dict[str, Any]:
        self._episode = episode
        self._x, self._steps = 0, 0
        self._positions = [(0.0, 0.0)]
        _trace(self.trace_dir, "start", episode["episode_id"])
        deadline = time.monotonic() + 60
        while self.together and time.monotonic() < deadline and self.together > len(
                {p.name.split(".")[2] for p in Path(self.trace_dir).glob("start.*")}):
            time.sleep(0.05)
        return {"obs": np.array([0.0, float(episode["length"])])}

    @node(inputs=("action",), outputs=("obs", "done"))
    def step(self, action: Any) -> dict[str, Any]:
        eid = self._episode["episode_id"]
        self._steps += 1
        if self._steps == 1 and eid in self.slow:
            time.sleep(self.slow[eid])
        if self.step_sleep_ms:
            time.sleep(self.step_sleep_ms / 1000.0)
        if self._steps == 2 and eid in self.raise_on:
            raise RuntimeError(f"boom in {eid}")
        if self._steps == 2 and eid in self.hang_once and self.trace_dir:
            marker = Path(self.trace_dir) / f"hang.{eid}"
            if not marker.exists():
                marker.write_text(str(os.getpid()))
                time.sleep(120)
        self._x += int(action)
        self._positions.append((float(self._x), 0.0))
        done = self._x >= int(self._episode["length"])
        return {"obs": np.array([float(self._x), float(self._episode["length"])]),
                "done": done}

    def trajectory(self) -> Trajectory:
        length = int(self._episode["length"])
        return Trajectory(positions=list(self._positions), success=self._x == length,
                          nav_error=float(abs(length - self._x)))


class StepPolicy(NodeSet):
    """Always one step forward (an inline policy)."""

    @node(inputs=("obs",), outputs=("action",))
    def act(self, obs: Any) -> dict[str, Any]:
        return {"action": 1}


class BatchedStepPolicy(NodeSet):
    """A shared, batched policy: one step forward per request; leaves ``host.{pid}`` traces.

    Also the toy model of the batching tests: ``double`` scales its batch, and raises on
    NaN so that one bad request in a batch can be told apart.
    """

    def __init__(self, trace_dir: str = "", call_sleep_ms: float = 0.0) -> None:
        self.call_sleep_ms = call_sleep_ms
        self.batch_sizes: list[int] = []
        if trace_dir:
            (Path(trace_dir) / f"host.{os.getpid()}").touch()

    @node(inputs=("obs",), outputs=("action",), batched=True, batch_dim="obs")
    def act(self, obs: np.ndarray) -> dict[str, Any]:
        self.batch_sizes.append(len(obs))
        return {"action": np.ones(len(obs), dtype=np.int64)}

    @node(inputs=("x", "tag"), outputs=("y", "tag"), batched=True, batch_dim="x")
    def double(self, x: np.ndarray, tag: list[Any]) -> dict[str, Any]:
        self.batch_sizes.append(len(x))
        if self.call_sleep_ms:
            time.sleep(self.call_sleep_ms / 1000.0)
        if np.isnan(x).any():
            raise ValueError("NaN in the batch")
        return {"y": x * 2.0, "tag": tag}

    @node(inputs=("x",), outputs=("y",))
    def echo(self, x: Any) -> dict[str, Any]:
        return {"y": x}

    @node(inputs=("x",), outputs=("y",))
    def fail(self, x: Any) -> dict[str, Any]:
        raise KeyError(f"no such thing: {x}")
