"""dealing_order: the episodes of a split in the order a stopping run deals them.

The order is drawn once from ``eval.order_seed`` (recorded in spec.json), so the run, a
resume of it and ``evaltui verify`` compute the same order from the same selection. Where
the dataset rows carry a ``task``, the order is stratified: each task's episodes are
shuffled and spread evenly over the order (the j-th of a task's n at (j + u) / n, u
uniform per task), so every prefix has each task in its share. Within that, the order is
random, and the confidence sequence's coverage under it is shown by simulation
(tests/engine/stats; docs/statistics.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def dealing_order(indices: Sequence[int], episodes: Sequence[Mapping[str, Any]],
                  seed: int) -> list[int]:
    """``indices`` (the selected episodes) in the seeded, task-stratified random order."""
    rng = np.random.default_rng(seed)
    tasks: dict[str, list[int]] = {}
    for index in indices:
        row = episodes[index] if 0 <= index < len(episodes) else {}
        tasks.setdefault(str(row.get("task", "")), []).append(index)
    if len(tasks) <= 1:
        return [int(i) for i in rng.permutation(np.asarray(indices, dtype=np.int64))]
    keys: list[tuple[float, float, int]] = []
    for name in sorted(tasks):
        members = rng.permutation(np.asarray(tasks[name], dtype=np.int64))
        offset = rng.random()
        n = len(members)
        keys.extend(((j + offset) / n, rng.random(), int(i)) for j, i in enumerate(members))
    keys.sort()
    return [i for _, _, i in keys]
