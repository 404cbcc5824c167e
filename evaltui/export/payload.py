"""What every tracker export carries, computed once from a :class:`RunSnapshot`.

The summary metrics (mean, CI bounds, n; by group for a benchmark that groups, e.g.
Meta-World by task), the spec as config, the episode rows as a
table, the running means as series over episodes finished, and a few episodes' frames
as GIFs; plus the one key that makes a second export of the same run dir update the
tracker's run instead of making another. Trackers only translate this into their API.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image, ImageSequence

from evaltui.results.groups import OVERALL, default_groups
from evaltui.results.stopnote import stopped_of
from evaltui.rundir.layout import episode_dir
from evaltui.runview.gif import NoFramesError, export_gif
from evaltui.runview.snapshot import RunSnapshot

MEDIA_EPISODES = 4
"""Episodes whose frames are exported as GIFs: the first errored one, then the first ok."""
GIF_MIN_WIDTH = 256
"""Exported GIFs narrower than this are scaled up by a whole factor."""
SERIES_POINTS = 1000
"""Points of each running-mean series at most (evenly spaced; the last is the summary)."""
TABLE_COLUMNS = ("episode_index", "episode_id", "status", "instruction", "step_count",
                 "elapsed_sec", "attempts", "error")


@dataclass(frozen=True)
class SeriesPoint:
    """A running mean after ``episodes`` finished episodes, with its 95% CI (None: n < 2)."""

    episodes: int
    mean: float
    low: float | None
    high: float | None


def run_key(snap: RunSnapshot) -> str:
    """The tracker-side id of this run: the same for every export of the same run dir.

    The run id is a second-precision timestamp, so two machines can make the same one;
    the hash of it with the start time and graph tells their runs apart.
    """
    s = snap.summary
    basis = f"{snap.run_id}|{s.get('started_at')}|{s.get('graph_name')}"
    digest = hashlib.sha1(basis.encode()).hexdigest()[:8]
    return f"evaltui-{re.sub(r'[^A-Za-z0-9_-]', '-', snap.run_id)}-{digest}"


def run_name(snap: RunSnapshot, given: str | None) -> str:
    return given or f"{snap.summary.get('graph_name') or 'run'} {snap.run_id}"


def summary_values(snap: RunSnapshot) -> dict[str, float | int]:
    """Flat numbers: ``m``, ``m/ci95_low``, ``m/ci95_high``, ``m/n`` per metric, and the
    counts (``episodes``, ``errors``, ``episodes_<status>``); a stopped run adds its
    confidence sequence (``m/cs95_low``, ``m/cs95_high``, ``stopped/n``, ``stopped/full_n``)."""
    out: dict[str, float | int] = {}
    for m in snap.metrics():
        out[m.name] = m.mean
        if m.ci95 is not None:
            out[f"{m.name}/ci95_low"], out[f"{m.name}/ci95_high"] = m.ci95
        if m.n is not None:
            out[f"{m.name}/n"] = m.n
        if m.ok_only is not None and snap.error_count:
            out[f"{m.name}/ok_only"] = m.ok_only
    stopped = stopped_of(snap.summary)
    if stopped is not None:  # the confidence sequence, never under a "ci95" key
        metric, (lo, hi) = stopped.get("metric"), stopped.get("interval") or (None, None)
        out[f"{metric}/cs95_low"], out[f"{metric}/cs95_high"] = lo, hi
        out["stopped/n"], out["stopped/full_n"] = stopped.get("n"), stopped.get("full_n")
    out.update(group_values(snap))
    out["episodes"] = len(snap.rows)
    out["errors"] = snap.error_count
    for status, count in (snap.summary.get("counts_by_status") or {}).items():
        out[f"episodes_{status}"] = int(count)
    return out


def group_values(snap: RunSnapshot) -> dict[str, float | int]:
    """A grouped benchmark's numbers by group (Meta-World: by task): ``m/by_task/T`` per
    metric, and ``success/by_task/T/ci95_low``, ``.../ci95_high``, ``.../n`` (the rate
    papers report per task; every metric's CI would be thousands of keys on MT50)."""
    found = default_groups(snap.summary, snap.rows)
    if found is None:
        return {}
    field, groups = found
    out: dict[str, float | int] = {}
    for g in groups:
        if g.key == OVERALL:  # the run's own numbers, already there
            continue
        for name, mean in g.stats.means.items():
            out[f"{name}/by_{field}/{g.key}"] = mean
        ci = g.stats.ci95.get("success")
        if ci is not None:
            out[f"success/by_{field}/{g.key}/ci95_low"] = ci[0]
            out[f"success/by_{field}/{g.key}/ci95_high"] = ci[1]
        if "success" in g.stats.n:
            out[f"success/by_{field}/{g.key}/n"] = g.stats.n["success"]
    return out


def config(snap: RunSnapshot) -> dict[str, Any]:
    """The spec as submitted, and where the numbers came from."""
    return {"spec": snap.spec or {}, "evaltui": {
        "run_id": snap.run_id, "run_dir": str(snap.run_dir), "state": snap.state.value,
        "graph_name": snap.summary.get("graph_name"), "dataset": snap.summary.get("dataset"),
        "split": snap.summary.get("split"), "worker_count": snap.summary.get("worker_count"),
        "executor": snap.executor, "numbers_from": snap.numbers_from}}


def flat(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted keys of a nested config (lists stay values), for trackers with flat params."""
    if isinstance(data, dict) and data:
        for key, value in data.items():
            yield from flat(value, f"{prefix}.{key}" if prefix else str(key))
    elif prefix:
        yield prefix, data


def table(snap: RunSnapshot) -> tuple[list[str], list[list[Any]]]:
    """The episode rows as columns and row lists (metrics after the row's own fields)."""
    names = snap.metric_names()
    rows = []
    for row in snap.rows:
        metrics = row.get("metrics") or {}
        error = row.get("error")
        cells = [row.get(c) for c in TABLE_COLUMNS[:-1]]
        cells.append(str(error).strip().splitlines()[-1] if error else None)
        rows.append([*(None if v is None else v if isinstance(v, int | float) else str(v)
                       for v in cells), *(_finite_or_none(metrics.get(n)) for n in names)])
    return [*TABLE_COLUMNS, *(f"metric/{n}" for n in names)], rows


def series(snap: RunSnapshot) -> dict[str, list[SeriesPoint]]:
    """Running mean and CI of each rate metric (success, spl, ndtw, sdtw) over episodes."""
    return {name: [SeriesPoint(int(c), float(m), None if math.isnan(lo) else float(lo),
                               None if math.isnan(hi) else float(hi))
                   for c, m, lo, hi in zip(s.counts, s.mean, s.low, s.high, strict=True)]
            for name, s in snap.running_means(SERIES_POINTS).items()}


def media_episodes(snap: RunSnapshot, count: int = MEDIA_EPISODES) -> list[int]:
    """The episodes shown as GIFs: errored ones first (what a reader looks for), then ok."""
    errored = [r["episode_index"] for r in snap.rows if r.get("status") in ("error", "timeout")]
    ok = [r["episode_index"] for r in snap.rows if r.get("status") == "ok"]
    return (errored[:1] + ok)[:count] if errored else ok[:count]


def write_gifs(snap: RunSnapshot, out_dir: Path, count: int = MEDIA_EPISODES
               ) -> dict[int, Path]:
    """GIFs of :func:`media_episodes` that have frames, as ``{index: path}``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    gifs = {}
    for index in media_episodes(snap, count):
        path = out_dir / f"ep{index:04d}.gif"
        try:
            export_gif(episode_dir(snap.run_dir, index), path)
            _upscale(path)
        except (NoFramesError, OSError, ValueError):
            continue  # an episode without frames has no media; its row is in the table
        gifs[index] = path
    return gifs


def _upscale(path: Path) -> None:
    """Scale a GIF of small frames (BabyAI's are 64 px) by a whole factor to about
    GIF_MIN_WIDTH, pixels kept sharp: trackers show media at its own size."""
    with Image.open(path) as gif:
        factor = GIF_MIN_WIDTH // gif.width
        if factor < 2:
            return
        size = (gif.width * factor, gif.height * factor)
        duration = gif.info.get("duration", 250)
        frames = [frame.convert("RGB").resize(size, Image.Resampling.NEAREST)
                  for frame in ImageSequence.Iterator(gif)]
    frames[0].save(path, format="GIF", save_all=True, append_images=frames[1:],
                   duration=duration, loop=0)


def _finite_or_none(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
