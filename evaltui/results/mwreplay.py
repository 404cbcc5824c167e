"""Re-run a Meta-World episode's logged actions in a fresh env and compare its rows.

The env is the run's own ``MetaWorldEnv`` (graph.json's params, frames off) built from the
episode's dataset row (task and seed): Meta-World is deterministic for a seed on one
machine, so every step's reward and done flag must equal the logged ``outputs.reward`` /
``outputs.done``, and at the end the replay's positions must equal trajectory.json's and
its metrics (computed as the episode loop computes them) the row's in episode.json, as
must its step count.

The log keeps an action as a list of numbers, not its dtype, and Meta-World scales a
float32 action in float32: the same numbers as float64 give another trajectory. An
episode whose every logged action component is a float32 value was answered in float32
(Meta-World's experts), else in float64; one policy answers one dtype.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from evaltui.benchmarks.metaworld.env import MetaWorldEnv
from evaltui.contract.records import LOG_FILENAME, TRAJECTORY_FILENAME
from evaltui.engine.episode.metrics import episode_metrics
from evaltui.results.replaysteps import Divergence, LoggedStep, logged_steps, same_reward
from evaltui.results.verify import StoredEpisode


def action_dtype(steps: list[LoggedStep]) -> type[np.floating[Any]]:
    """float32 when every component of every logged action is a float32 value."""
    for step in steps:
        values = np.asarray(step.action, dtype=np.float64).ravel()
        if not np.array_equal(values.astype(np.float32).astype(np.float64), values):
            return np.float64
    return np.float32


def replay_episode(ep: StoredEpisode, row: Mapping[str, Any], step_node: str,
                   params: Mapping[str, Any], tolerance: float = 0.0
                   ) -> tuple[int, Divergence | None]:
    """(steps replayed, first divergence or None) for one Meta-World episode."""
    if not (ep.ep_dir / LOG_FILENAME).is_file():
        return 0, Divergence(ep.label, 0, f"no {LOG_FILENAME}: no actions to replay")
    steps = list(logged_steps(ep.ep_dir / LOG_FILENAME, step_node))
    for step in steps:
        action = step.action
        if not isinstance(action, list) or not all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in action):
            return 0, Divergence(ep.label, step.step, f"logged action {action!r} is not a "
                                 "list of numbers; cannot replay it")
    dtype = action_dtype(steps)
    env = MetaWorldEnv(**{**params, "frames": "off"})
    try:
        env.set_episode(row)
        count = 0
        for step in steps:
            out = env.step(np.asarray(step.action, dtype=dtype))
            count += 1
            if not same_reward(step.reward, out["reward"], tolerance):
                return count, Divergence(ep.label, step.step, f"reward: replay "
                                         f"{out['reward']!r}, log {step.reward!r}")
            if step.done is not out["done"]:
                return count, Divergence(ep.label, step.step, f"done: replay {out['done']}, "
                                         f"log {step.done!r}")
        return count, _compare_rows(ep, row, env, count, tolerance)
    finally:
        env.close()


def _compare_rows(ep: StoredEpisode, row: Mapping[str, Any], env: MetaWorldEnv, count: int,
                  tolerance: float) -> Divergence | None:
    """The replay's positions, step count and metrics against the episode's files."""
    traj = env.trajectory()
    stored = (ep.trajectory or {}).get("positions")
    replayed = [list(p) for p in traj.positions]
    if stored is not None and replayed != stored:
        at = next((i for i, (a, b) in enumerate(zip(replayed, stored, strict=False))
                   if a != b), min(len(replayed), len(stored)))
        return Divergence(ep.label, count, f"position #{at}: replay "
                          f"{replayed[at] if at < len(replayed) else 'none'}, "
                          f"{TRAJECTORY_FILENAME} {stored[at] if at < len(stored) else 'none'}")
    if ep.record.get("step_count") != count:
        return Divergence(ep.label, count, f"step_count: replay {count}, episode.json "
                          f"{ep.record.get('step_count')!r}")
    metrics = episode_metrics(traj, row.get("reference_path"), row.get("geodesic_distance"),
                              float(getattr(MetaWorldEnv, "success_distance", 1.0)),
                              failed=ep.record.get("status") != "ok")
    logged = ep.record.get("metrics") or {}
    for name in sorted(set(metrics) | set(logged)):
        mine, theirs = metrics.get(name), logged.get(name)
        if mine is None or theirs is None or not _close(float(theirs), mine, tolerance):
            return Divergence(ep.label, count, f"metric {name}: replay {mine!r}, "
                              f"episode.json {theirs!r}")
    return None


def _close(a: float, b: float, tolerance: float) -> bool:
    return a == b or abs(a - b) <= tolerance or (math.isnan(a) and math.isnan(b))
