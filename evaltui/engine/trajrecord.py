"""The trajectory record of one episode: everything its metrics are computed from.

Written by the run process as ``episodes/ep{NNNN}/trajectory.json`` next to
episode.json, so that ``evaltui verify`` (or a reader with numpy) can recompute every
metric from a copied ep dir alone: the agent positions in order, the env's success and
final geodesic distance, and the dataset's reference path and geodesic distance.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltui.engine.nodes import Trajectory
from evaltui.states import EpisodeStatus

TRAJECTORY_FILE = "trajectory.json"


def _points(points: Any) -> list[list[float]] | None:
    if points is None:
        return None
    return [[float(v) if not float(v).is_integer() else int(v) for v in p] for p in points]


def trajectory_record(episode: Mapping[str, Any], status: EpisodeStatus,
                      trajectory: Trajectory | None, *, success_distance: float
                      ) -> dict[str, Any]:
    """The JSON record of one episode's trajectory (``positions`` None if the env had none)."""
    geodesic = episode.get("geodesic_distance")
    return {
        "episode_id": episode.get("episode_id"),
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
