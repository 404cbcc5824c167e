"""Recompute a run's metrics from its stored trajectories and compare them with the run dir.

Every ``episodes/epNNNN/`` dir holds ``trajectory.json`` (positions, reference path,
geodesic distance, ``d_th``), so each per-episode metric can be recomputed from the dir
alone; the run means, 95% CIs and counts are then recomputed from those values, not from
the stored ones. The CI is computed here (mean +/- t * sd / sqrt(n), clipped to the
metric's range) rather than with ``engine.episode.metrics.aggregate``, so a bug in the engine's
aggregation shows up as a difference instead of being reproduced.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evaltui.contract.records import (
    EPISODE_FILENAME,
    EPISODES_DIRNAME,
    SUMMARY_FILENAME,
    TRAJECTORY_FILENAME,
)
from evaltui.contract.states import EpisodeStatus
from evaltui.engine.episode.metrics import metric_range, ndtw, path_length, spl, t_quantile_975
from evaltui.results.runrows import episode_dirs
from evaltui.results.steplog import log_metrics
from evaltui.results.verifystop import check_stopped
from evaltui.rundir.safeopen import (
    LeavesRoot,
    NotAnObject,
    kind_or_outside,
    read_object_inside,
)

DEFAULT_TOLERANCE = 1e-9
AGGREGATED = frozenset({EpisodeStatus.OK, EpisodeStatus.ERROR, EpisodeStatus.TIMEOUT})
"""Statuses behind ``metrics``; ``cancelled`` episodes are in no aggregate (resume re-runs them)."""
FAILED = frozenset({EpisodeStatus.ERROR, EpisodeStatus.TIMEOUT})
SUMMARY_BLOCKS = (("metrics", False), ("metrics_ok_only", True))
"""summary.json key prefixes and whether they are over ok episodes only."""


class VerifyInputError(ValueError):
    """The path is not a verifiable run dir (exit 2); the message says what is missing."""


@dataclass(frozen=True)
class StoredEpisode:
    """One episode dir: its episode.json record and its trajectory.json (None if absent)."""

    index: int
    ep_dir: Path
    record: dict[str, Any]
    trajectory: dict[str, Any] | None

    @property
    def label(self) -> str:
        return f"{self.ep_dir.name} ({self.record.get('episode_id', '?')})"


@dataclass(frozen=True)
class Mismatch:
    """A stored value that differs from its recomputation by more than the tolerance.

    ``diff`` is None when the two cannot be subtracted: the value is on one side only, or
    is not a number (a status, a missing CI).
    """

    where: str
    field: str
    metric: str
    stored: Any
    recomputed: Any
    diff: float | None


@dataclass
class VerifyReport:
    """What ``evaltui verify`` found; ``ok`` when nothing differs above ``tolerance``."""

    run_dir: str
    tolerance: float
    episodes_checked: int = 0
    values_compared: int = 0
    max_diff: float = 0.0
    max_where: str | None = None
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

    def compare(self, where: str, fld: str, metric: str, stored: Any, recomputed: Any) -> None:
        """Compare one stored number with its recomputation (None on either side allowed)."""
        if stored is None and recomputed is None:
            return
        self.values_compared += 1
        diff = _difference(stored, recomputed)
        if diff is not None and (diff > self.max_diff or self.max_where is None):
            self.max_diff, self.max_where = diff, f"{where} {metric} ({fld})"
        if diff is None or diff > self.tolerance:
            self.mismatches.append(Mismatch(where, fld, metric, stored, recomputed, diff))

    def compare_maps(self, where: str, fld: str, stored: Any,
                     recomputed: Mapping[str, Any]) -> None:
        """Compare two {metric: number} maps key by key; a key on one side only differs."""
        if not isinstance(stored, Mapping):
            self.mismatches.append(Mismatch(where, fld, "*", stored, dict(recomputed), None))
            return
        for name in _ordered_union(recomputed, stored):
            self.compare(where, fld, name, stored.get(name), recomputed.get(name))

    def note(self, where: str, fld: str, what: str, stored: Any, expected: Any) -> None:
        """A non-numeric disagreement (status, ids, a file that should be there)."""
        self.mismatches.append(Mismatch(where, fld, what, stored, expected, None))


def _difference(stored: Any, recomputed: Any) -> float | None:
    if isinstance(stored, bool) or isinstance(recomputed, bool):
        return None
    if not isinstance(stored, int | float) or not isinstance(recomputed, int | float):
        return None
    if stored == recomputed:  # also inf == inf
        return 0.0
    diff = abs(float(stored) - float(recomputed))
    return diff if math.isfinite(diff) else math.inf


def _ordered_union(first: Iterable[str], second: Iterable[str]) -> list[str]:
    return list(dict.fromkeys([*first, *second]))


# --- per episode ---------------------------------------------------------------------------


def recompute_episode(trajectory: Mapping[str, Any]) -> dict[str, float]:
    """An episode's metrics from its trajectory.json, by the rule of the issue-9 contract.

    ok: success, path_length, spl (with a geodesic distance), ndtw and sdtw (with a
    reference path), nav_error and the env's extra entries. error/timeout (DESIGN §12):
    success = 0, spl = 0 (with a geodesic distance), ndtw = sdtw = 0 (with a reference
    path), no path_length or nav_error, and the extra entries of its partial trajectory.
    """
    status = trajectory.get("status")
    success = 1.0 if trajectory.get("success") else 0.0
    geodesic = trajectory.get("geodesic_distance")
    reference = trajectory.get("reference_path") or None
    positions = trajectory.get("positions") or None
    metrics: dict[str, float] = {"success": success}
    if positions is not None:
        length = path_length(positions)
        if geodesic is not None:
            metrics["spl"] = spl(success, float(geodesic), length)
        if reference is not None:
            n = ndtw(positions, reference, float(trajectory["d_th"]))
            metrics["ndtw"] = n
            metrics["sdtw"] = success * n
        metrics["path_length"] = length
        if trajectory.get("nav_error") is not None:
            metrics["nav_error"] = float(trajectory["nav_error"])
        for name, value in (trajectory.get("extra") or {}).items():
            # The engine refuses an extra that redefines a built-in metric, so one here
            # would be a tampered file: keep the recomputed built-in and let it differ.
            metrics.setdefault(name, float(value))
    if status in FAILED:
        metrics["success"] = 0.0
        if geodesic is not None:
            metrics["spl"] = 0.0
        if reference is not None:
            metrics["ndtw"] = metrics["sdtw"] = 0.0
        metrics.pop("path_length", None)
        metrics.pop("nav_error", None)
    return metrics


# --- run level -----------------------------------------------------------------------------


def aggregate_metrics(
    rows: Iterable[tuple[str, Mapping[str, float]]], ok_only: bool = False,
) -> tuple[dict[str, float], dict[str, list[float] | None], dict[str, int]]:
    """(means, 95% CIs, n) per metric over ``(status, metrics)`` rows.

    Rows of ``ok``/``error``/``timeout`` episodes count (``ok`` only with ``ok_only``);
    each metric is averaged over the rows that have a finite value for it.
    """
    values: dict[str, list[float]] = {}
    for status, metrics in rows:
        if status not in AGGREGATED or (ok_only and status != EpisodeStatus.OK):
            continue
        for name, value in metrics.items():
            if math.isfinite(value):
                values.setdefault(name, []).append(float(value))
    means: dict[str, float] = {}
    cis: dict[str, list[float] | None] = {}
    ns: dict[str, int] = {}
    for name, xs in values.items():
        arr = np.asarray(xs, dtype=float)
        n = len(arr)
        mean = float(arr.mean())
        means[name], ns[name] = mean, n
        if n < 2:
            cis[name] = None
            continue
        half = t_quantile_975(n - 1) * float(arr.std(ddof=1)) / math.sqrt(n)
        low, high = metric_range(name, xs)
        cis[name] = [max(mean - half, low), min(mean + half, high)]
    return means, cis, ns


# --- the run dir ---------------------------------------------------------------------------


def load_episode_dirs(run_dir: Path) -> list[StoredEpisode]:
    """Every ``epNNNN`` dir with an episode.json, by index (trajectory.json may be absent):
    :func:`evaltui.results.runrows.episode_dirs`'s.

    Files are opened with the run dir as the root (:mod:`evaltui.rundir.safeopen`): a symlink out
    of it is an input error, never followed.
    """
    problems: list[str] = []
    found = []
    for index, name in episode_dirs(run_dir, problems):
        ep = f"{EPISODES_DIRNAME}/{name}"
        record = _read_object(run_dir, f"{ep}/{EPISODE_FILENAME}")
        traj = f"{ep}/{TRAJECTORY_FILENAME}"
        trajectory = _read_object(run_dir, traj) if kind_or_outside(run_dir, traj) else None
        found.append(StoredEpisode(index, run_dir / ep, record, trajectory))
    if problems:
        raise VerifyInputError(problems[0])
    return found


def _read_object(run_dir: Path, rel: str) -> dict[str, Any]:
    path = run_dir / rel
    try:
        return read_object_inside(run_dir, rel)
    except LeavesRoot:
        raise VerifyInputError(f"{path} is a symlink that leaves the run dir; not read") from None
    except NotAnObject:
        raise VerifyInputError(f"{path} is not a JSON object") from None
    except (OSError, ValueError) as exc:
        raise VerifyInputError(f"{path} is unreadable: {exc}") from None


def load_run(run_dir: Path) -> tuple[dict[str, Any], list[StoredEpisode]]:
    """summary.json and the episodes of a run dir, or VerifyInputError saying what is wrong."""
    run_dir = Path(run_dir)
    if kind_or_outside(run_dir, SUMMARY_FILENAME) is None:
        raise VerifyInputError(f"{run_dir} is not a run dir (no {SUMMARY_FILENAME})")
    summary = _read_object(run_dir, SUMMARY_FILENAME)
    episodes = load_episode_dirs(run_dir)
    if not episodes:
        raise VerifyInputError(f"{run_dir} has no episode dirs with {EPISODE_FILENAME}")
    lacking = [e.ep_dir.name for e in episodes
               if e.trajectory is None and e.record.get("status") in AGGREGATED]
    if lacking:
        shown = ", ".join(lacking[:20]) + (f" and {len(lacking) - 20} more" if len(lacking) > 20
                                           else "")
        raise VerifyInputError(f"{len(lacking)} of {len(episodes)} episodes have no "
                               f"{TRAJECTORY_FILENAME}: {shown}")
    return summary, episodes


def verify_run(run_dir: Path, tolerance: float = DEFAULT_TOLERANCE) -> VerifyReport:
    """Recompute every per-episode metric and the run aggregates of ``run_dir`` and compare."""
    summary, episodes = load_run(run_dir)
    report = VerifyReport(run_dir=str(run_dir), tolerance=tolerance)
    rows = summary.get("episodes")
    summary_rows = {r.get("episode_index"): r for r in (rows if isinstance(rows, list) else [])
                    if isinstance(r, dict)}
    recomputed: list[tuple[str, dict[str, float]]] = []
    by_index: dict[int, dict[str, float]] = {}
    for ep in episodes:
        status = ep.record.get("status")
        if status not in AGGREGATED or ep.trajectory is None:
            continue  # cancelled: no metrics, in no aggregate
        report.episodes_checked += 1
        _check_identity(report, ep)
        metrics = recompute_episode(ep.trajectory)
        if status == EpisodeStatus.OK:
            # From the logged steps rather than trajectory.json's copies (Meta-World).
            metrics.update(log_metrics(Path(run_dir), f"{EPISODES_DIRNAME}/{ep.ep_dir.name}",
                                       ep.trajectory.get("extra") or {}))
        recomputed.append((str(status), metrics))
        by_index[ep.index] = metrics
        report.compare_maps(ep.label, "episode.json metrics", ep.record.get("metrics"), metrics)
        row = summary_rows.pop(ep.index, None)
        if row is None:
            report.note(ep.label, "summary.json episodes", "row", None, "a row")
            continue
        if row.get("status") != status:
            report.note(ep.label, "summary.json episodes", "status", row.get("status"), status)
        report.compare_maps(ep.label, "summary.json episodes metrics", row.get("metrics"),
                            metrics)
    for index, row in sorted(summary_rows.items(), key=lambda kv: str(kv[0])):
        if row.get("status") in AGGREGATED:
            report.note(f"episode {index}", "summary.json episodes", "episode dir", None,
                        f"{EPISODES_DIRNAME}/ep{index:04d}/{EPISODE_FILENAME}"
                        if isinstance(index, int) else "an episode dir")
    _check_summary(report, summary, recomputed)
    check_stopped(report, Path(run_dir), summary, by_index)
    return report


def _check_identity(report: VerifyReport, ep: StoredEpisode) -> None:
    """trajectory.json must describe the episode of its dir, with consistent radii."""
    traj = ep.trajectory or {}
    for key in ("episode_index", "episode_id", "status"):
        if traj.get(key) != ep.record.get(key):
            report.note(ep.label, TRAJECTORY_FILENAME, key, traj.get(key), ep.record.get(key))
    if traj.get("d_th") != traj.get("success_distance"):
        report.note(ep.label, TRAJECTORY_FILENAME, "d_th", traj.get("d_th"),
                    traj.get("success_distance"))


def _check_summary(report: VerifyReport, summary: Mapping[str, Any],
                   recomputed: list[tuple[str, dict[str, float]]]) -> None:
    where = SUMMARY_FILENAME
    for prefix, ok_only in SUMMARY_BLOCKS:
        means, cis, ns = aggregate_metrics(recomputed, ok_only=ok_only)
        report.compare_maps(where, prefix, summary.get(prefix), means)
        report.compare_maps(where, f"{prefix}_n", summary.get(f"{prefix}_n"), ns)
        stored_cis = summary.get(f"{prefix}_ci95")
        if not isinstance(stored_cis, Mapping):
            report.note(where, f"{prefix}_ci95", "*", stored_cis, cis)
            continue
        for name in _ordered_union(cis, stored_cis):
            got, want = stored_cis.get(name), cis.get(name)
            if isinstance(got, list) and len(got) == 2 and want is not None:
                report.compare(where, f"{prefix}_ci95", f"{name} low", got[0], want[0])
                report.compare(where, f"{prefix}_ci95", f"{name} high", got[1], want[1])
            elif got is not None or want is not None:
                report.note(where, f"{prefix}_ci95", name, got, want)
    failed = sum(1 for status, _ in recomputed if status in FAILED)
    report.compare(where, "error_count", "error_count", summary.get("error_count"), failed)
