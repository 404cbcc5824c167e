"""Read a finished (or running) run dir offline: its header, summary and episode rows.

``evaltui compare`` and ``evaltui show RUN_DIR`` work on run dirs without a backend.
The rows come from summary.json["episodes"]; episodes whose episode.json is newer than
the last summary write (a running or killed run) are added from their ep dirs, and a
missing or unreadable summary.json is rebuilt from the ep dirs alone. An episode.json
that exists but cannot be used is an ``unreadable`` row (it never counts in a metric),
not a missing one, also where summary.json still has an ok row for it (the API's
episode routes say the same). Files are opened through :mod:`evaltui.rundir.safeopen`
with the run dir as the root: a run dir copied from someone else never makes us read
through a symlink out of it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaltui.contract.records import EPISODE_FILENAME, EPISODES_DIRNAME, SUMMARY_FILENAME
from evaltui.rundir.layout import episode_index_from_dirname, is_run_id, outputs_root, runs_root
from evaltui.rundir.safeopen import (
    LeavesRoot,
    NotAnObject,
    kind_or_outside,
    list_dir_inside,
    read_object_inside,
)

UNREADABLE = "unreadable"
"""The ``status`` of the row of an episode whose episode.json cannot be used."""


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
    """Files that could not be used (an unreadable summary.json or episode.json, or a
    symlink out of the run dir)."""


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
    summary = _read_object(run_dir, SUMMARY_FILENAME, problems)
    episodes = (summary or {}).get("episodes") or ()
    rows: dict[int, dict[str, Any]] = {index: row for row in episodes
                                       if (index := _index(row)) is not None}
    for index, name in episode_dirs(run_dir, problems):
        # Read even where the summary has a row: a damaged episode.json (the episode's own
        # record) makes it unreadable here as in the API's single-episode route.
        rel = f"{EPISODES_DIRNAME}/{name}/{EPISODE_FILENAME}"
        seen = len(problems)
        row = _read_object(run_dir, rel, problems)
        if row is not None and _index(row) == index:
            rows.setdefault(index, row)
        elif row is not None or len(problems) > seen:
            why = problems[-1] if len(problems) > seen else f"{rel}: not this episode's row"
            rows[index] = unreadable_row(index, why)
    if summary is None and not rows and kind_or_outside(run_dir, EPISODES_DIRNAME) != "dir":
        raise RunDirError(f"{run_dir} has neither {SUMMARY_FILENAME} nor {EPISODES_DIRNAME}/: "
                          "not a run dir")
    ordered = [rows[i] for i in sorted(rows)]
    # episode.json carries the run's header too, so a run without a summary still has one.
    header = summary or next((r for r in ordered if r.get("status") != UNREADABLE), {})
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


def unreadable_row(index: int, why: str) -> dict[str, Any]:
    """The row standing in for an episode whose episode.json cannot be used."""
    return {"episode_index": index, "status": UNREADABLE, "error": why, "metrics": {}}


def episode_dirs(run_dir: Path, problems: list[str]) -> list[tuple[int, str]]:
    """``(index, dir name)`` of the ep dirs that hold an episode.json (or a symlink named
    so), in index order."""
    try:
        names = list_dir_inside(run_dir, EPISODES_DIRNAME)
    except LeavesRoot:
        problems.append(f"{run_dir / EPISODES_DIRNAME}: a symlink that leaves the run dir; "
                        "not read")
        return []
    except OSError:
        return []
    found = []
    for name in names:
        index = episode_index_from_dirname(name)
        if index is None:
            continue
        rel = f"{EPISODES_DIRNAME}/{name}/{EPISODE_FILENAME}"
        if kind_or_outside(run_dir, rel) is not None:
            found.append((index, name))
    return sorted(found)


def _read_object(run_dir: Path, rel: str, problems: list[str]) -> dict[str, Any] | None:
    try:
        return read_object_inside(run_dir, rel)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except LeavesRoot:
        problems.append(f"{run_dir / rel}: a symlink that leaves the run dir; not read")
    except NotAnObject:
        problems.append(f"{run_dir / rel}: not a JSON object")
    except (OSError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        problems.append(f"{run_dir / rel}: unreadable ({first})")
    return None


def _index(row: Any) -> int | None:
    if not isinstance(row, dict):
        return None
    index = row.get("episode_index")
    return index if isinstance(index, int) and not isinstance(index, bool) and index >= 0 \
        else None


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)
