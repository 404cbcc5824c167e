"""Nodesets the own-environment tests run in a second Python environment (numpy<2 there).

Only Python 3.8 syntax here and no evaltui beyond its public nodeset API: this module is
imported by the env host inside that environment, where evaltui is not installed.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from evaltui.engine.nodes import EnvNodeSet, Frame, NodeSet, Trajectory, node


class NumpyCartPole(EnvNodeSet):
    """gymnasium's CartPole, reset to ``episode['seed']``; ``done`` after ``max_steps``.

    ``numpy_major`` (when set) is checked at construction: the environment it runs in."""

    def __init__(self, max_steps: int = 40, numpy_major: int = 0, frame_every: int = 0,
                 require_env: str = "", die_once_in: str = "", step_sleep_ms: float = 0.0,
                 python_in: str = "") -> None:
        seen = int(np.__version__.split(".")[0])
        if python_in:  # the interpreter it runs in, for the test to see where that was
            with open(os.path.join(python_in, f"python.{os.getpid()}"), "w") as fh:
                fh.write(sys.executable)
        if numpy_major and seen != numpy_major:
            raise RuntimeError(f"expected numpy {numpy_major}.x, got {np.__version__}")
        if require_env and require_env not in os.environ:
            raise RuntimeError(f"{require_env} is not set: not started by its launcher")
        self.die_once_in = die_once_in
        self.step_sleep_ms = step_sleep_ms
        self.seed = -1
        if die_once_in:
            with open(os.path.join(die_once_in, f"host.{os.getpid()}"), "w"):
                pass  # the test watches these PIDs
        self.env = CartPoleEnv()
        self.max_steps = max_steps
        self.frame_every = frame_every
        self.steps = 0
        self.positions = []

    def _obs(self, obs):
        out = {"state": obs}
        if self.frame_every and self.steps % self.frame_every == 0:
            out["frame"] = Frame(np.full((8, 8, 3), self.steps % 256, dtype=np.uint8))
        return out

    def set_episode(self, episode):
        obs, _ = self.env.reset(seed=int(episode["seed"]))
        self.seed = int(episode["seed"])
        self.steps = 0
        self.positions = [(float(obs[0]),)]
        return {"obs": self._obs(obs)}

    @node(inputs=("action",), outputs=("obs", "done", "reward"))
    def step(self, action):
        self._maybe_die()
        if self.step_sleep_ms:
            time.sleep(self.step_sleep_ms / 1000.0)
        obs, reward, terminated, truncated, _ = self.env.step(int(action))
        self.steps += 1
        self.positions.append((float(obs[0]),))
        done = bool(terminated or truncated or self.steps >= self.max_steps)
        return {"obs": self._obs(obs), "done": done, "reward": np.float32(reward)}

    def _maybe_die(self):
        """SIGKILL this host mid-episode, once, in the episode of seed 1."""
        if not self.die_once_in or self.seed != 1 or self.steps != 5:
            return
        marker = os.path.join(self.die_once_in, "killed")
        if not os.path.exists(marker):
            with open(marker, "w") as fh:
                fh.write(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)

    def trajectory(self):
        return Trajectory(positions=list(self.positions), success=self.steps >= self.max_steps,
                          nav_error=float(abs(self.positions[-1][0])),
                          extra={"steps_alive": float(self.steps)})

    @classmethod
    def step_limit(cls, episode):
        return int(episode.get("limit", 40))


class BalancePolicy(NodeSet):
    """A fixed linear policy on CartPole's state (one item)."""

    @node(inputs=("obs",), outputs=("action",))
    def act(self, obs):
        s = obs["state"]
        return {"action": int(s[2] + 0.5 * s[3] + 0.01 * s[1] > 0)}


class BatchedBalancePolicy(NodeSet):
    """The same policy, batched: ``obs['state']`` arrives stacked (B, 4)."""

    def __init__(self, numpy_major: int = 0) -> None:
        if numpy_major and int(np.__version__.split(".")[0]) != numpy_major:
            raise RuntimeError(f"expected numpy {numpy_major}.x, got {np.__version__}")
        self.calls = 0

    @node(inputs=("obs",), outputs=("action",), batched=True, batch_dim="obs")
    def act(self, obs):
        s = np.asarray(obs["state"])
        self.calls += 1
        return {"action": (s[:, 2] + 0.5 * s[:, 3] + 0.01 * s[:, 1] > 0).astype(np.int64)}


class TimedStepEnv(EnvNodeSet):
    """Sleeps ``step_ms`` a step and returns an observation of ``shape`` (the benchmark)."""

    def __init__(self, shape=(7, 7, 3), step_ms: float = 1.0, max_steps: int = 200) -> None:
        self.obs = np.zeros(tuple(shape), dtype=np.uint8)
        self.step_ms = step_ms
        self.max_steps = max_steps
        self.steps = 0

    def set_episode(self, episode):
        self.steps = 0
        return {"obs": self.obs}

    @node(inputs=("action",), outputs=("obs", "done"))
    def step(self, action):
        end = time.perf_counter() + self.step_ms / 1000.0
        while time.perf_counter() < end:
            pass
        self.steps += 1
        return {"obs": self.obs, "done": self.steps >= self.max_steps}

    def trajectory(self):
        return Trajectory(positions=[(0.0,)], success=True, nav_error=0.0)


class ZeroPolicy(NodeSet):
    @node(inputs=("obs",), outputs=("action",))
    def act(self, obs):
        return {"action": 0}
