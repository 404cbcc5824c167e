"""Read a finished (or running) run dir offline: its header, summary and episode rows.

``evaltui compare`` and ``evaltui show RUN_DIR`` work on run dirs without a backend.
The rows come from summary.json["episodes"]; episodes whose episode.json is newer than
the last summary write (a running or killed run) are added from their ep dirs, and a
missing or unreadable summary.json is rebuilt from the ep dirs alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaltui.rundir import (
    EPISODES_DIRNAME,
    SUMMARY_FILENAME,
    episode_index_from_dirname,
    is_run_id,
    outputs_root,
    read_json,
    runs_root,
)

EPISODE_FILENAME = "episode.json"


class RunDirError(ValueError):
    """A run reference that names no readable run dir (bad input: exit 2)."""


@dataclass(frozen=True)
class RunRows:
    """One run dir as read from disk."""

    run_dir: Path
    run_id: str
    graph_name: str | None
    dataset: str | None
    split: str | None
    summary: dict[str, Any] | None
    """summary.json as written, or None when it is missing or unreadable."""
    rows: list[dict[str, Any]]
    """Episode rows in episode_index order (one per index)."""
    problems: list[str] = field(default_factory=list)
    """Files that could not be used (an unreadable summary.json or episode.json)."""


def resolve_run_dir(ref: str, *, outputs: str | os.PathLike[str] | None = None) -> Path:
    """The run dir ``ref`` names: an existing dir path, else a run id under the outputs root."""
    path = Path(ref).expanduser()
    if path.is_dir():
        return path.resolve()
    if is_run_id(ref):
        candidate = runs_root(outputs_root(outputs)) / ref
        if candidate.is_dir():
            return candidate
        raise RunDirError(f"no run {ref} under {runs_root(outputs_root(outputs))}")
    raise RunDirError(f"{ref!r} is neither a run dir nor a run id (YYYYmmdd_HHMMSS)")


def load_run(run_dir: Path) -> RunRows:
    """Header, summary and episode rows of ``run_dir`` (see the module docstring)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir} is not a directory")
    problems: list[str] = []
    summary = _read_object(run_dir / SUMMARY_FILENAME, problems)
    rows: dict[int, dict[str, Any]] = {}
    for row in (summary or {}).get("episodes") or ():
        index = _index(row)
        if index is not None:
            rows[index] = row
    for index, path in _episode_files(run_dir):
        if index not in rows:
            row = _read_object(path, problems)
            if row is not None and _index(row) == index:
                rows[index] = row
    if summary is None and not rows and not (run_dir / EPISODES_DIRNAME).is_dir():
        raise RunDirError(f"{run_dir} has neither {SUMMARY_FILENAME} nor {EPISODES_DIRNAME}/: "
                          "not a run dir")
    ordered = [rows[i] for i in sorted(rows)]
    # episode.json carries the run's header too, so a run without a summary still has one.
    header = summary or (ordered[0] if ordered else {})
    return RunRows(
        run_dir=run_dir,
        run_id=str(header.get("run_id") or run_dir.name),
        graph_name=_str_or_none(header.get("graph_name")),
        dataset=_str_or_none(header.get("dataset")),
        split=_str_or_none(header.get("split")),
        summary=summary,
        rows=ordered,
        problems=problems,
    )


def _episode_files(run_dir: Path) -> list[tuple[int, Path]]:
    try:
        entries = list(os.scandir(run_dir / EPISODES_DIRNAME))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for entry in entries:
        index = episode_index_from_dirname(entry.name)
        path = Path(entry.path) / EPISODE_FILENAME
        if index is not None and path.is_file():
            found.append((index, path))
    return sorted(found)


def _read_object(path: Path, problems: list[str]) -> dict[str, Any] | None:
    try:
        obj = read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        problems.append(f"{path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        return None
    if not isinstance(obj, dict):
        problems.append(f"{path}: not a JSON object")
        return None
    return obj


def _index(row: Any) -> int | None:
    if not isinstance(row, dict):
        return None
    index = row.get("episode_index")
    return index if isinstance(index, int) and not isinstance(index, bool) and index >= 0 \
        else None


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)
