"""Meta-World's scripted experts on (task, seed) pairs, written with metaworld alone.

The reference the engine's ``mw_expert`` runs are held to: the goal-observable env built
with the seed, reset, the task's ``ENV_POLICY_MAP`` policy until ``info["success"]`` (the
episode ends there, Meta-World's evaluation convention) or 500 steps.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any


def expert_episode(task: str, seed: int, max_steps: int = 500) -> dict[str, Any]:
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE
    from metaworld.policies import ENV_POLICY_MAP

    env = ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE[f"{task}-goal-observable"](seed=seed)
    policy = ENV_POLICY_MAP[task]()
    obs, _ = env.reset()
    total, first = 0.0, None
    steps = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Constant(s) may be too high"
        for steps in range(1, max_steps + 1):
            obs, reward, terminated, truncated, info = env.step(policy.get_action(obs))
            total += float(reward)
            if info["success"]:
                first = steps
                break
            if terminated or truncated:
                break
    env.close()
    return {"task": task, "seed": seed, "success": first is not None,
            "steps_to_success": first, "return": total, "steps": steps}


def expert_episodes(pairs: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    return [expert_episode(task, seed) for task, seed in pairs]
