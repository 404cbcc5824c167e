"""``MetaWorldEnv``: one Meta-World v3 task episode per dataset row, replicated per worker.

Loop ports: ``obs`` (the 39-float goal-observable observation, float64, as Meta-World's
scripted policies read it), ``frame`` (a :class:`~evaltui.engine.nodes.Frame` of the
``corner`` camera when frames are on, encoded into the episode's video), and from the
step node ``done``, ``reward`` and ``success`` (the step's ``info["success"]``).

Success convention (Meta-World's evaluation, ``metaworld.evaluation``, and its papers):
an episode succeeds when ``info["success"]`` is true at any step within the 500-step
limit; by default the episode then ends (``terminate_on_success``, as Meta-World's own
``AutoTerminateOnSuccessWrapper`` does in evaluation), so ``return`` is the sum of rewards
up to and including that step. Metrics (``trajectory().extra``): ``return``,
``steps_to_success`` (the 1-based step of the first success; absent when the episode
failed, so its mean is over successes and its n says how many), besides the engine's
``path_length`` (of the gripper, metres) and ``nav_error`` (the final object-to-target
distance, ``info["obj_to_target"]``). SPL and nDTW are absent: the rows have no geodesic
distance or reference path.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from evaltui.engine.nodes import EnvNodeSet, Frame, Trajectory, node

from . import MAX_STEPS
from .mw_import import make_env, metaworld_modules
from .rendering import FrameSchedule, probe_backend, render_backend

ACTION_DIM = 4


class MetaWorldEnv(EnvNodeSet):
    """One Meta-World simulator; a fresh env is built per episode from its (task, seed).

    Args:
        frames: ``off``, ``every:N`` (a frame at reset and every N-th step) or ``end``
            (the last step's only).
        width, height: frame size in pixels.
        camera: the MuJoCo camera frames are rendered from.
        terminate_on_success: end the episode at its first success (Meta-World's
            evaluation convention); off, it runs the full 500 steps.
        video: frames go into the episode's one ``assets/video.mp4`` (H.264, PyAV);
            off, one PNG each.
    """

    success_distance = 1.0

    def __init__(self, frames: str = "off",
                 width: Annotated[int, Field(ge=16, le=1024)] = 224,
                 height: Annotated[int, Field(ge=16, le=1024)] = 224,
                 camera: str = "corner", terminate_on_success: bool = True,
                 video: bool = True) -> None:
        self.schedule = FrameSchedule.parse(frames)
        self.width, self.height, self.camera = int(width), int(height), camera
        self.terminate_on_success = bool(terminate_on_success)
        self.video = bool(video)
        self._env: Any = None
        self._renderer: Any = None
        self._task = ""
        self._reset_state()

    def _reset_state(self) -> None:
        self._positions: list[tuple[float, ...]] = []
        self._steps = 0
        self._return = 0.0
        self._first_success: int | None = None
        self._obj_to_target = math.nan
        self._done = False

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> str | None:
        """At spec check: a bad ``frames`` value is refused, and with frames on the GL
        backend is probed in a subprocess (:func:`.rendering.probe_backend`) at the
        frames' size: a missing renderer is one line naming it and its fix, before
        anything runs; a working one is a note saying which backend and what a frame
        cost (``eval`` prints it, summary.json keeps it in ``check_notes``)."""
        if not FrameSchedule.parse(str(params.get("frames", "off"))).on:
            return None
        if params.get("video", True) and importlib.util.find_spec("av") is None:
            raise ValueError("video frames need PyAV: pip install 'evaltui[metaworld]' "
                             "(or set env.video=false for PNG frames)")
        probe = probe_backend(width=int(params.get("width", 224)),
                              height=int(params.get("height", 224)))
        if not probe.works:
            raise ValueError(probe.message)
        return probe.message

    @classmethod
    def step_limit(cls, episode: Mapping[str, Any]) -> int | None:
        """Meta-World's ``max_path_length`` (500), as the manifest records it; at spec
        check, a row that is not a Meta-World episode is refused (ValueError)."""
        if "task" not in episode or "seed" not in episode:
            raise ValueError(f"episode {episode.get('episode_id')!r} has no task and seed: "
                             "MetaWorldEnv runs Meta-World episodes (--dataset metaworld)")
        return int(episode.get("max_steps", MAX_STEPS))

    def set_episode(self, episode: Mapping[str, Any]) -> dict[str, Any]:
        """Build the episode's env from its task and seed, reset it, return the ports."""
        self.close()
        self._task = str(episode["task"])
        gl = render_backend() if self.schedule.on else None
        self._env = make_env(self._task, int(episode["seed"]), gl)
        obs, _ = self._env.reset()
        self._reset_state()
        self._positions.append(self._hand(obs))
        return {"obs": np.asarray(obs, dtype=np.float64),
                "frame": self._frame() if self.schedule.at_reset else None}

    @node(inputs=("action",), outputs=("obs", "frame", "done", "reward", "success"))
    def step(self, action: Any) -> dict[str, Any]:
        """Apply one action (4 floats in [-1, 1]: xyz delta and gripper)."""
        if self._env is None:
            raise RuntimeError("step() called before set_episode()")
        if self._done:
            raise RuntimeError("step() called after the episode ended")
        # Passed on in its own dtype: Meta-World scales a float32 action in float32, so a
        # cast would change the trajectory (the experts answer float32).
        act = np.asarray(action)
        if act.shape != (ACTION_DIM,) or act.dtype.kind != "f" or not np.all(np.isfinite(act)):
            raise ValueError(f"action must be {ACTION_DIM} finite floats, got {action!r}")
        obs, reward, terminated, truncated, info = self._env.step(act)
        self._steps += 1
        self._return += float(reward)
        success = bool(info["success"])
        if success and self._first_success is None:
            self._first_success = self._steps
        self._obj_to_target = float(info.get("obj_to_target", math.nan))
        hand = self._hand(obs)
        if hand != self._positions[-1]:
            self._positions.append(hand)
        self._done = bool(terminated or truncated or self._steps >= MAX_STEPS
                          or (success and self.terminate_on_success))
        emit = self.schedule.emit(self._steps, self._done)
        return {"obs": np.asarray(obs, dtype=np.float64),
                "frame": self._frame() if emit else None,
                "done": self._done, "reward": float(reward), "success": success}

    def trajectory(self) -> Trajectory:
        """Gripper positions, success at any step, and the return / steps to success."""
        if self._env is None:
            raise RuntimeError("trajectory() called before set_episode()")
        extra = {"return": self._return}
        if self._first_success is not None:
            extra["steps_to_success"] = float(self._first_success)
        return Trajectory(positions=list(self._positions),
                          success=self._first_success is not None,
                          nav_error=self._obj_to_target, extra=extra)

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        if self._env is not None:
            self._env.close()
            self._env = None

    @staticmethod
    def _hand(obs: Any) -> tuple[float, ...]:
        return tuple(float(v) for v in obs[:3])

    def _frame(self) -> Frame:
        if self._renderer is None:
            mujoco = metaworld_modules().mujoco
            self._renderer = mujoco.Renderer(self._env.model, self.height, self.width)
        self._renderer.update_scene(self._env.data, camera=self.camera)
        # MuJoCo renders bottom-up for Meta-World's corner cameras; flip to image rows.
        return Frame(pixels=np.ascontiguousarray(self._renderer.render()[::-1]),
                     video=self.video)
