"""A hand-written run dir for ``evaltui verify``, with metrics computed independently.

The expected numbers here are not computed with evaltui: DTW is a plain-Python dynamic
programme, the t quantile the closed-form Student-t CDF inverted by bisection, means
and standard deviations come from :mod:`statistics`.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

START = [[1, 1], [1, 2], [2, 2]]


def dtw(query: list[list[float]], reference: list[list[float]]) -> float:
    inf = float("inf")
    n, m = len(query), len(reference)
    d = [[inf] * (m + 1) for _ in range(n + 1)]
    d[0][0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost = math.dist(query[i - 1], reference[j - 1])
            d[i][j] = cost + min(d[i - 1][j], d[i][j - 1], d[i - 1][j - 1])
    return d[n][m]


def t_cdf(t: float, df: int) -> float:
    """Student's t CDF in closed form (Abramowitz & Stegun 26.7.3/26.7.4)."""
    if df % 2 == 0:
        x = t / math.sqrt(df + t * t)
        terms = sum(math.comb(2 * j, j) / 4**j * (1 - x * x) ** j for j in range(df // 2))
        return 0.5 + x / 2 * terms
    theta = math.atan(t / math.sqrt(df))
    terms = sum((2**j * math.factorial(j)) ** 2 / math.factorial(2 * j + 1)
                * math.cos(theta) ** (2 * j) for j in range((df - 1) // 2))
    return 0.5 + (theta + math.sin(theta) * math.cos(theta) * terms) / math.pi


def t975(df: int) -> float:
    """t_{0.975, df}: the closed-form CDF inverted by bisection (to the last bit)."""
    lo, hi = 0.0, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < 0.975 else (lo, mid)
    return (lo + hi) / 2


RANGES = {"success": (0, 1), "spl": (0, 1), "ndtw": (0, 1), "sdtw": (0, 1)}


def summary_block(rows: list[dict[str, float]]) -> tuple[dict, dict, dict]:
    values: dict[str, list[float]] = {}
    for metrics in rows:
        for name, x in metrics.items():
            values.setdefault(name, []).append(x)
    means, cis, ns = {}, {}, {}
    for name, xs in values.items():
        mean = statistics.fmean(xs)
        means[name], ns[name] = mean, len(xs)
        if len(xs) < 2:
            cis[name] = None
            continue
        half = t975(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
        low, high = RANGES.get(name, (0, math.inf))
        cis[name] = [max(mean - half, low), min(mean + half, high)]
    return means, cis, ns


def trajectory(index: int, status: str, positions: list | None, success: bool | None,
               nav_error: float | None, steps: float | None, reference: list | None = START,
               geodesic: float | None = 2.0) -> dict[str, Any]:
    return {"episode_index": index, "episode_id": f"fx-{index:02d}", "status": status,
            "positions": positions, "success": success, "nav_error": nav_error,
            "extra": {} if steps is None else {"steps": steps},
            "reference_path": reference, "geodesic_distance": geodesic,
            "success_distance": 1.0, "d_th": 1.0}


def episodes() -> list[tuple[dict[str, Any], dict[str, float] | None]]:
    """(trajectory, hand-computed metrics) of five episodes, one of each case."""
    wander = [[1, 1], [2, 1], [3, 1], [3, 2]]
    return [
        (trajectory(0, "ok", START, True, 0.0, 3.0),
         {"success": 1.0, "spl": 1.0, "ndtw": 1.0, "sdtw": 1.0, "path_length": 2.0,
          "nav_error": 0.0, "steps": 3.0}),
        (trajectory(1, "ok", wander, False, 2.0, 5.0),
         {"success": 0.0, "spl": 0.0, "ndtw": math.exp(-dtw(wander, START) / 3),
          "sdtw": 0.0, "path_length": 3.0, "nav_error": 2.0, "steps": 5.0}),
        # The env said success, but the episode errored: it counts as a failure in every
        # metric with a failure value (its partial path alone would score nDTW exp(-1/3))
        # and has no path length or nav error (DESIGN §12).
        (trajectory(2, "error", START[:2], True, 1.0, 1.0),
         {"success": 0.0, "spl": 0.0, "ndtw": 0.0, "sdtw": 0.0, "steps": 1.0}),
        (trajectory(3, "timeout", None, None, None, None),
         {"success": 0.0, "spl": 0.0, "ndtw": 0.0, "sdtw": 0.0}),
        # No reference path and no geodesic: success, path length, nav error, steps only.
        (trajectory(4, "ok", [[5, 5], [5, 6]], True, 0.0, 2.0, reference=None, geodesic=None),
         {"success": 1.0, "path_length": 1.0, "nav_error": 0.0, "steps": 2.0}),
    ]


def write_run(run_dir: Path) -> Path:
    """A run dir of the five episodes plus a cancelled one, consistent throughout."""
    rows = []
    for traj, metrics in episodes():
        ep_dir = run_dir / "episodes" / f"ep{traj['episode_index']:04d}"
        ep_dir.mkdir(parents=True)
        row = {"episode_index": traj["episode_index"], "episode_id": traj["episode_id"],
               "status": traj["status"], "metrics": metrics, "error": None}
        (ep_dir / "trajectory.json").write_text(json.dumps(traj))
        (ep_dir / "episode.json").write_text(json.dumps(row))
        rows.append(row)
    cancelled = {"episode_index": 5, "episode_id": "fx-05", "status": "cancelled",
                 "metrics": {}, "error": None}
    (run_dir / "episodes" / "ep0005").mkdir()
    (run_dir / "episodes" / "ep0005" / "episode.json").write_text(json.dumps(cancelled))
    rows.append(cancelled)
    scored = [r["metrics"] for r in rows if r["status"] != "cancelled"]
    ok = [r["metrics"] for r in rows if r["status"] == "ok"]
    summary: dict[str, Any] = {"status": "done", "episodes": rows, "error_count": 2}
    for prefix, block in (("metrics", scored), ("metrics_ok_only", ok)):
        summary[prefix], summary[f"{prefix}_ci95"], summary[f"{prefix}_n"] = summary_block(block)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    graph = {"nodesets": {"env": {"impl": "fixture_envs:GridEnv"}},
             "loop": {"env": "env", "step": "env_step"}}
    (run_dir / "graph.json").write_text(json.dumps(graph))
    return run_dir


def edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
