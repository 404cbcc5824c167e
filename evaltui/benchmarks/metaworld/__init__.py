"""Meta-World v3 manipulation (the ``metaworld`` package, extra ``evaltui[metaworld]``).

Splits: ``MT10`` (its 10 tasks x 50 seeds), ``MT50`` (its 50 tasks x 10 seeds) and one
split per task (``reach-v3``, ...: 50 seeds). Episode ``(task, seed)`` is the task's
goal-observable env built with ``seed`` (``ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE[...](seed=)``,
the env Meta-World's own scripted policies are written for) and reset once; Meta-World
fixes the object and goal placement from the seed, so an episode is the same on every
machine that runs the same mujoco build. Rows are ordered seed-major (episode ``i`` of MT10
is task ``i % 10``, seed ``i // 10``), so the first ``n x tasks`` episodes cover every task
with ``n`` seeds. Each manifest line: ``episode_id`` (``"{task}/s{seed}"``), ``scene_id``
and ``task`` (the task), ``seed`` and ``max_steps`` (500, Meta-World's
``max_path_length``).

The task lists are fixed here (a test holds them to ``metaworld.env_dict``), so that this
package, its manifests and a spec check never import metaworld or mujoco.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from evaltui.engine.graph.benchmarks import Benchmark

DATA_DIR = Path(__file__).resolve().parent / "data"

MAX_STEPS = 500
"""Meta-World's ``max_path_length``: every v3 task truncates after 500 steps."""

MT10_TASKS: tuple[str, ...] = (
    "reach-v3", "push-v3", "pick-place-v3", "door-open-v3", "drawer-open-v3",
    "drawer-close-v3", "button-press-topdown-v3", "peg-insert-side-v3", "window-open-v3",
    "window-close-v3",
)
MT50_TASKS: tuple[str, ...] = (
    "assembly-v3", "basketball-v3", "bin-picking-v3", "box-close-v3",
    "button-press-topdown-v3", "button-press-topdown-wall-v3", "button-press-v3",
    "button-press-wall-v3", "coffee-button-v3", "coffee-pull-v3", "coffee-push-v3",
    "dial-turn-v3", "disassemble-v3", "door-close-v3", "door-lock-v3", "door-open-v3",
    "door-unlock-v3", "hand-insert-v3", "drawer-close-v3", "drawer-open-v3",
    "faucet-open-v3", "faucet-close-v3", "hammer-v3", "handle-press-side-v3",
    "handle-press-v3", "handle-pull-side-v3", "handle-pull-v3", "lever-pull-v3",
    "pick-place-wall-v3", "pick-out-of-hole-v3", "pick-place-v3", "plate-slide-v3",
    "plate-slide-side-v3", "plate-slide-back-v3", "plate-slide-back-side-v3",
    "peg-insert-side-v3", "peg-unplug-side-v3", "soccer-v3", "stick-push-v3",
    "stick-pull-v3", "push-v3", "push-wall-v3", "push-back-v3", "reach-v3", "reach-wall-v3",
    "shelf-place-v3", "sweep-into-v3", "sweep-v3", "window-open-v3", "window-close-v3",
)

#: Split name -> (its tasks, seeds per task).
SPLITS: dict[str, tuple[tuple[str, ...], int]] = {
    "MT10": (MT10_TASKS, 50),
    "MT50": (MT50_TASKS, 10),
    **{task: ((task,), 50) for task in MT50_TASKS},
}


def manifest_path(split: str) -> Path:
    """Path of the shipped JSONL manifest of ``split`` (one of :data:`SPLITS`)."""
    if split not in SPLITS:
        raise ValueError(f"unknown Meta-World split {split!r}; known: {sorted(SPLITS)}")
    return DATA_DIR / f"{split}.jsonl"


#: This benchmark in the engine's registry (:mod:`evaltui.engine.graph.benchmarks`).
BENCHMARK = Benchmark(name="metaworld",
                      splits={split: partial(manifest_path, split) for split in SPLITS},
                      default_split="MT10", group_by="task", path_metrics=False)
