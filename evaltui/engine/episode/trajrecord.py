"""The trajectory record of one episode: everything its metrics are computed from.

Written by the run process as ``episodes/ep{NNNN}/trajectory.json`` next to
episode.json, so that ``evaltui verify`` (or a reader with numpy) can recompute every
metric from a copied ep dir alone: the agent positions in order, the env's success and
final geodesic distance, and the dataset's reference path and geodesic distance. The
file is :class:`evaltui.contract.records.TrajectoryRecord`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltui.contract.records import TrajectoryRecord
from evaltui.contract.states import EpisodeStatus
from evaltui.engine.nodes import Trajectory


def dataset_id(value: Any) -> str | int | None:
    """An id from a dataset row as the records hold it: a string or an integer as given,
    anything else (a float, a list) as its text."""
    if value is None or isinstance(value, str) or \
            (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return str(value)


def task_and_seed(episode: Mapping[str, Any]) -> dict[str, Any]:
    """The row's ``task`` (as text) and ``seed`` (an integer; any other seed is left out)."""
    task, seed = episode.get("task"), episode.get("seed")
    return {"task": None if task is None else str(task),
            "seed": seed if isinstance(seed, int) and not isinstance(seed, bool) else None}


def _points(points: Any) -> list[list[int | float]] | None:
    if points is None:
        return None
    return [[float(v) if not float(v).is_integer() else int(v) for v in p] for p in points]


def trajectory_record(episode: Mapping[str, Any], status: EpisodeStatus,
                      trajectory: Trajectory | None, *, success_distance: float
                      ) -> dict[str, Any]:
    """The record's fields but ``episode_index`` (the worker scoring the episode does not
    know it); ``positions`` None if the env had none. A plain dict: it crosses the pool's
    pipe, and :func:`trajectory_json` makes it the record."""
    geodesic = episode.get("geodesic_distance")
    return {
        "episode_id": dataset_id(episode.get("episode_id")),
        "status": status.value,
        "positions": _points(trajectory.positions) if trajectory is not None else None,
        "success": bool(trajectory.success) if trajectory is not None else None,
        "nav_error": float(trajectory.nav_error) if trajectory is not None else None,
        "extra": ({k: float(v) for k, v in trajectory.extra.items()}
                  if trajectory is not None else {}),
        "reference_path": _points(episode.get("reference_path") or None),
        "geodesic_distance": float(geodesic) if geodesic is not None else None,
        "success_distance": float(success_distance),
        "d_th": float(success_distance),
    }


def trajectory_json(episode_index: int, fields: Mapping[str, Any]) -> dict[str, Any]:
    """trajectory.json's content: the record of :func:`trajectory_record`'s fields,
    checked against the schema."""
    record = TrajectoryRecord.model_validate({"episode_index": episode_index, **fields})
    return record.model_dump(mode="json")
