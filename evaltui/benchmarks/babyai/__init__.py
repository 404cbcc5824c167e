"""BabyAI "go to" navigation from the ``minigrid`` package: the embedded default benchmark.

Episode ``i`` of a split is the split's gym env reset with ``seed=i``. Each split ships an
R2R-style manifest (``data/{split}.jsonl``, built by ``scripts/make_babyai_manifests.py``)
holding the instruction, start, goal cells, reference path and geodesic distance, so the
metrics never need to re-derive them and the env can check at reset that the installed
minigrid still produces the same mission for the seed.

Importing this package does not import minigrid; only ``minigrid_import`` does.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from evaltui.engine.graph.benchmarks import Benchmark

#: Split name -> gymnasium env id.
SPLITS: dict[str, str] = {
    "GoToLocal": "BabyAI-GoToLocal-v0",
    "GoToObjMaze": "BabyAI-GoToObjMaze-v0",
    "GoTo": "BabyAI-GoTo-v0",
}

DATA_DIR = Path(__file__).resolve().parent / "data"


def manifest_path(split: str) -> Path:
    """Path of the shipped JSONL manifest of ``split`` (one of :data:`SPLITS`)."""
    if split not in SPLITS:
        raise ValueError(f"unknown BabyAI split {split!r}; known: {sorted(SPLITS)}")
    return DATA_DIR / f"{split}.jsonl"


def load_manifest(split: str, limit: int | None = None) -> list[dict[str, Any]]:
    """Read the first ``limit`` (default all) episodes of a split's manifest."""
    episodes: list[dict[str, Any]] = []
    with manifest_path(split).open(encoding="utf-8") as fh:
        for line in fh:
            if limit is not None and len(episodes) >= limit:
                break
            if line.strip():
                episodes.append(json.loads(line))
    return episodes


#: This benchmark in the engine's registry (:mod:`evaltui.engine.graph.benchmarks`).
BENCHMARK = Benchmark(name="babyai",
                      splits={split: partial(manifest_path, split) for split in SPLITS},
                      default_split="GoToLocal", group_by=None)
