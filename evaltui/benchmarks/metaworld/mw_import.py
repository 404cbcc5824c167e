"""The one place that imports metaworld (and so mujoco), lazily, on first use.

Nothing imports this module at spec check or in the run process: only a worker's env or
expert nodeset calls :func:`metaworld_modules` when its first episode starts, so a worker
is spawned or forked before any mujoco or OpenGL import and never inherits a GL context
(lerobot#3274's ``EGL_BAD_CONTEXT``). ``MUJOCO_GL`` is read by mujoco when it is imported:
:func:`metaworld_modules` sets it from the ``gl`` argument first (rendering envs only).
"""

from __future__ import annotations

import os
import warnings
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

INSTALL_HINT = "pip install 'evaltui[metaworld]'"

# metaworld's scripted policies warn on every step whose gain saturates the action; the
# env clips it to [-1, 1] anyway, and pytest's "warnings are errors" would fail on it.
_SATURATION_WARNING = r"Constant\(s\) may be too high"


@lru_cache(maxsize=1)
def metaworld_modules(gl: str | None = None) -> Any:
    """``envs`` (task -> goal-observable env class), ``policies`` (task -> expert class)
    and ``mujoco``; ``gl`` (``egl``/``osmesa``) becomes ``MUJOCO_GL`` unless it is set."""
    if gl:
        os.environ.setdefault("MUJOCO_GL", gl)
        if gl == "osmesa":
            os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
    try:
        # optional: metaworld, mujoco (the metaworld extra); they also cost ~0.5 s and a GL
        # backend choice, which only workers make.
        import mujoco
        from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE
        from metaworld.policies import ENV_POLICY_MAP
    except ImportError as exc:
        raise ImportError(f"the metaworld benchmark needs metaworld ({exc}); "
                          f"{INSTALL_HINT}") from exc
    warnings.filterwarnings("ignore", message=_SATURATION_WARNING, category=UserWarning)
    envs = {name.removesuffix("-goal-observable"): cls
            for name, cls in ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE.items()}
    return SimpleNamespace(envs=envs, policies=dict(ENV_POLICY_MAP), mujoco=mujoco)


def make_env(task: str, seed: int, gl: str | None = None) -> Any:
    """Task ``task``'s goal-observable env, built with ``seed`` (its placement)."""
    mw = metaworld_modules(gl)
    if task not in mw.envs:
        raise ValueError(f"unknown Meta-World task {task!r}")
    return mw.envs[task](seed=seed)


def make_expert(task: str) -> Any:
    """Meta-World's scripted policy for ``task`` (``metaworld.policies.ENV_POLICY_MAP``)."""
    mw = metaworld_modules()
    if task not in mw.policies:
        raise ValueError(f"Meta-World has no scripted policy for task {task!r}")
    return mw.policies[task]()
