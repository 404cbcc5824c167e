"""Hand-written run dirs with known per-episode values, for the results tests.

Two runs over 12 BabyAI-style episodes (plus one cancelled in both):
- success A = 0000000 111 0 0(error), success B = 1111111 0 11 0(timeout) 0
  -> 7 episodes gained (0..6), 1 lost (7): McNemar b = 1, c = 7, p = 0.0703125.
- B's episode 10 timed out with only ndtw and path_length (as an older writer left it):
  success, spl, ndtw and sdtw count 0, path length leaves it out (DESIGN §12).
- A's episode 11 errored with no metrics at all: success, spl, ndtw, sdtw 0; nothing else.
- ``only_a`` is a metric only A reports: never compared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evaltui.rundir.jsonfiles import write_json_atomic

N = 12
SUCCESS_A = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0]
SUCCESS_B = [1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0]
SPL_A = [0.0] * 7 + [0.9, 0.5, 1.0, 0.0, 0.0]
SPL_B = [1.0, 0.8, 0.6, 0.75, 1.0, 0.5, 0.9, 0.0, 1.0, 0.7, 0.0, 0.0]
NDTW_A = [0.2, 0.3, 0.1, 0.4, 0.25, 0.3, 0.2, 0.9, 0.8, 1.0, 0.15, None]
NDTW_B = [0.9, 0.85, 0.7, 0.8, 1.0, 0.6, 0.95, 0.3, 0.9, 0.75, 0.4, 0.5]
PATH_A = [5.0, 7.0, 4.0, 6.0, 9.0, 3.0, 8.0, 2.0, 4.0, 3.0, 10.0, None]
PATH_B = [2.0, 3.0, 4.0, 3.0, 2.0, 5.0, 3.0, 6.0, 4.0, 3.0, 3.0, 6.0]
STATUS_A = ["ok"] * 11 + ["error"]
STATUS_B = ["ok"] * 10 + ["timeout", "ok"]


def episode_id(index: int) -> str:
    return f"GoToLocal-{index:04d}"


def episode_row(index: int, status: str, metrics: dict[str, float], **extra: Any
                ) -> dict[str, Any]:
    row = {"episode_index": index, "episode_id": episode_id(index),
           "scene_id": f"BabyAI-GoToLocal-v0:seed={index}", "instruction": "go to the ball",
           "metrics": metrics, "step_count": 5, "elapsed_sec": 0.01, "status": status,
           "error": None if status in ("ok", "cancelled") else f"{status} in episode {index}",
           "worker_id": 0, "attempts": 1}
    row.update(extra)
    return row


def rows_a() -> list[dict[str, Any]]:
    rows = []
    for i in range(N):
        if STATUS_A[i] == "error":
            metrics: dict[str, float] = {}
        else:
            metrics = {"success": float(SUCCESS_A[i]), "spl": SPL_A[i], "ndtw": NDTW_A[i],
                       "sdtw": SUCCESS_A[i] * NDTW_A[i], "path_length": PATH_A[i],
                       "nav_error": 0.0 if SUCCESS_A[i] else 2.0, "only_a": 1.0}
        rows.append(episode_row(i, STATUS_A[i], metrics))
    rows.append(episode_row(N, "cancelled", {}))
    return rows


def rows_b() -> list[dict[str, Any]]:
    rows = []
    for i in range(N):
        if STATUS_B[i] == "timeout":
            metrics = {"ndtw": NDTW_B[i], "path_length": PATH_B[i]}
        else:
            metrics = {"success": float(SUCCESS_B[i]), "spl": SPL_B[i], "ndtw": NDTW_B[i],
                       "sdtw": SUCCESS_B[i] * NDTW_B[i], "path_length": PATH_B[i],
                       "nav_error": 0.0 if SUCCESS_B[i] else 1.0}
        rows.append(episode_row(i, STATUS_B[i], metrics))
    rows.append(episode_row(N, "cancelled", {}))
    return rows


def write_run(run_dir: Path, rows: list[dict[str, Any]], *, graph_name: str,
              summary: bool = True, summary_extra: dict[str, Any] | None = None) -> Path:
    """A finished run dir: every episode.json, and summary.json unless ``summary=False``."""
    header = {"run_id": run_dir.name, "graph_name": graph_name, "dataset": "babyai",
              "split": "GoToLocal", "worker_count": 1}
    for row in rows:
        ep = run_dir / "episodes" / f"ep{row['episode_index']:04d}"
        ep.mkdir(parents=True)
        write_json_atomic(ep / "episode.json", {**row, **header}, durable=False)
    if summary:
        counts: dict[str, int] = {}
        for row in rows:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        write_json_atomic(run_dir / "summary.json", {
            **header, "status": "done", "episodes_total": len(rows),
            "episodes_finished": len(rows), "counts_by_status": counts, "metrics": {},
            "metrics_ci95": {}, "episodes": rows, **(summary_extra or {})}, durable=False)
    return run_dir


def write_pair(root: Path) -> tuple[Path, Path]:
    """Runs A and B under ``root/eval_runs`` with run ids for names."""
    a = write_run(root / "eval_runs" / "20250101_120000", rows_a(), graph_name="bot")
    b = write_run(root / "eval_runs" / "20250101_130000", rows_b(), graph_name="model")
    return a, b
