"""The benchmark registry: built-in datasets by name, without the engine importing them.

A benchmark package (``evaltui.benchmarks.babyai``, ``evaltui.benchmarks.metaworld``, or a
third party's) exposes a module-level ``BENCHMARK`` (:class:`Benchmark`): its name, its
splits (the JSONL manifest of each), the default split and the row field its tables group
by. The engine knows the built-in ones only as module paths (:data:`BUILTIN_MODULES`,
imported on first use, by name) and finds others through the ``evaltui.benchmarks`` entry
point group, whose entries name such a module. Importing a benchmark package must stay
cheap: no simulator import (minigrid, metaworld, mujoco) at import time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path

ENTRY_POINT_GROUP = "evaltui.benchmarks"

#: Built-in benchmark modules, each holding a ``BENCHMARK`` (data, not an import).
BUILTIN_MODULES: tuple[str, ...] = ("evaltui.benchmarks.babyai", "evaltui.benchmarks.metaworld")


@dataclass(frozen=True)
class Benchmark:
    """A named dataset of JSONL manifests, one per split.

    Args:
        name: the dataset name a spec gives (``eval.dataset``).
        splits: split name -> a callable returning the manifest path (lazy: a benchmark
            with many splits need not stat them all to be listed).
        default_split: the split taken when a spec names none.
        group_by: the row field its tables break down by when ``--by`` is not given
            (None: one overall row).
        path_metrics: whether its rows carry reference paths and geodesic distances
            (SPL, nDTW); without them, spec check does not warn that they are missing.
    """

    name: str
    splits: Mapping[str, Callable[[], Path]]
    default_split: str
    group_by: str | None = None
    path_metrics: bool = True

    def manifest(self, split: str) -> Path:
        return self.splits[split]()


@lru_cache(maxsize=1)
def _registry() -> dict[str, Benchmark]:
    found: dict[str, Benchmark] = {}
    modules = list(BUILTIN_MODULES)
    modules += [ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)
                if ep.value not in modules]
    for module in modules:
        bench = getattr(importlib.import_module(module.partition(":")[0]), "BENCHMARK", None)
        if isinstance(bench, Benchmark):
            found.setdefault(bench.name, bench)
    return found


def benchmark_names() -> list[str]:
    """The names of every registered benchmark, built-in ones first."""
    return list(_registry())


def get_benchmark(name: str) -> Benchmark | None:
    """The benchmark called ``name``, or None when no registered one is."""
    return _registry().get(name)


def default_group_by(dataset: str | None) -> str | None:
    """The field a run's tables group by by default: the benchmark's, else none."""
    bench = get_benchmark(dataset) if dataset else None
    return bench.group_by if bench is not None else None
