"""Datasets: JSONL episode files (DESIGN §9) and episode selection.

A dataset is named either by a registered benchmark (``babyai``, ``metaworld``: their
manifests, one file per split, :mod:`evaltui.engine.graph.benchmarks`) or by a path: a
``.jsonl`` file, or a directory holding ``{split}.jsonl``. Each line is one episode; its
0-based line number is the ``episode_index``. Required per line: ``episode_id``; used when
present: ``scene_id``, ``task``, ``seed``, ``instruction``, ``reference_path``,
``geodesic_distance`` and whatever the env nodeset reads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from evaltui.engine.graph.benchmarks import benchmark_names, get_benchmark


class DatasetError(ValueError):
    """A dataset, split or selection is invalid; ``field`` names the JobSpec field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def builtin_splits(dataset: str) -> list[str]:
    """The split names of a registered benchmark (none for a path)."""
    bench = get_benchmark(dataset)
    return list(bench.splits) if bench is not None else []


def resolve_dataset(dataset: str, split: str | None) -> tuple[Path, str]:
    """The JSONL file of a dataset split and the split's name.

    ``split`` may be omitted for a built-in dataset (its default split) and for a single
    ``.jsonl`` file (the split is the file's stem). Errors name the field at fault.
    """
    bench = get_benchmark(dataset)
    if bench is not None:
        split = split or bench.default_split
        if split not in bench.splits:
            raise DatasetError("eval.split", f"unknown split {split!r} of dataset {dataset!r} "
                               f"(choose from {sorted(bench.splits)})")
        return bench.manifest(split), split
    path = Path(dataset).expanduser()
    if path.is_dir():
        if not split:
            raise DatasetError("eval.split", f"required: {path} is a directory of split files")
        candidate = path / f"{split}.jsonl"
        if not candidate.is_file():
            found = sorted(p.stem for p in path.glob("*.jsonl"))
            raise DatasetError("eval.split", f"no {split}.jsonl in {path} (splits: {found})")
        return candidate.resolve(), split
    if path.suffix == ".jsonl":
        if not path.is_file():
            raise DatasetError("eval.dataset", f"no such file: {path}")
        return path.resolve(), split or path.stem
    raise DatasetError("eval.dataset", f"unknown dataset {dataset!r}: use one of "
                       f"{benchmark_names()}, a .jsonl file, or a directory of split files")


def load_episodes(path: Path) -> list[dict[str, Any]]:
    """Every episode of a JSONL file; a bad line is an error naming its line number."""
    return list(_load_cached(str(path), path.stat().st_mtime_ns))


@lru_cache(maxsize=8)
def _load_cached(path: str, _mtime_ns: int) -> tuple[dict[str, Any], ...]:
    episodes = []
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise DatasetError("eval.dataset", f"{path}:{lineno}: not JSON ({exc})") from None
            if not isinstance(record, dict) or "episode_id" not in record:
                raise DatasetError("eval.dataset",
                                   f"{path}:{lineno}: each line must be an object with episode_id")
            episodes.append(record)
    if not episodes:
        raise DatasetError("eval.dataset", f"{path} holds no episodes")
    return tuple(episodes)


def select_episodes(
    total: int,
    episodes: Sequence[Mapping[str, Any]],
    *,
    start: int = 0,
    count: int | None = None,
    indices: Sequence[int] | None = None,
    selectors: Mapping[str, str] | None = None,
) -> list[int]:
    """The episode indices a spec selects: explicit indices win over start/count.

    ``selectors`` keep episodes whose field matches the regex (``re.search``).
    """
    if indices is not None:
        for i, index in enumerate(indices):
            if not 0 <= index < total:
                raise DatasetError(f"eval.episode_indices[{i}]",
                                   f"{index} is out of range (the split has {total} episodes)")
        chosen = list(dict.fromkeys(indices))
    else:
        if start >= total:
            raise DatasetError("eval.start_episode_index",
                               f"{start} is out of range (the split has {total} episodes)")
        end = total if count is None else start + count
        if end > total:
            raise DatasetError("eval.episode_count", f"start {start} + count {count} exceeds "
                               f"the {total} episodes of the split")
        chosen = list(range(start, end))
    for field_name, pattern in (selectors or {}).items():
        regex = re.compile(pattern)
        chosen = [i for i in chosen if regex.search(str(episodes[i].get(field_name, "")))]
    if not chosen:
        raise DatasetError("eval.episode_selectors", "no episode matches the selection")
    return chosen
