"""Specs, datasets, waiting and process cleanup for the scheduler tests."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root

# tests/ holds the suite-wide helpers; driver scripts run from their own folder need it too.
_TESTS_DIR = str(Path(__file__).resolve().parents[1])
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
from waiting import wait_until as _wait_until  # noqa: E402

HERE = Path(__file__).resolve().parent
MODULE = "sched_nodesets"


def write_dataset(path: Path, goals: list[int]) -> Path:
    with open(path, "w") as fh:
        for i, goal in enumerate(goals):
            fh.write(json.dumps({"episode_id": f"line-{i}", "scene_id": f"len{goal}",
                                 "instruction": f"walk to {goal}", "goal": goal,
                                 "reference_path": [[float(x), 0.0] for x in range(goal + 1)],
                                 "geodesic_distance": float(goal)}) + "\n")
    return path


def line_graph(policy: str = "VramPolicy", **params: Any) -> dict[str, Any]:
    return {
        "name": "line",
        "nodesets": {
            "env": {"impl": f"{MODULE}:LineEnv", "parallelism": "replicated"},
            "policy": {"impl": f"{MODULE}:{policy}", "parallelism": "inline", "params": params},
        },
        "nodes": {"policy": {"nodeset": "policy", "op": "act"},
                  "env_step": {"nodeset": "env", "op": "step"}},
        "edges": [["@obs", "policy.obs"], ["policy.action", "env_step.action"]],
        "loop": {"env": "env", "step": "env_step"},
    }


def line_spec(dataset: Path, *, policy: str = "VramPolicy", episodes: int | None = None,
              marginal_vram_mb: int = 0, exclusive: bool = False, priority: int = 0,
              tie_to_backend: bool = False, **params: Any) -> dict[str, Any]:
    ev: dict[str, Any] = {"dataset": str(dataset), "step_budget": 50}
    if episodes is not None:
        ev["episode_count"] = episodes
    return {"graph": line_graph(policy, **params), "eval": ev,
            "scheduling": {"marginal_vram_mb": marginal_vram_mb, "exclusive_gpu": exclusive,
                           "priority": priority, "tie_to_backend": tie_to_backend},
            "active_workspace_dir": str(HERE)}



def wait_until(cond: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """:func:`tests.waiting.wait_until` with this folder's default deadline."""
    return _wait_until(cond, timeout, what)


def record(outputs: Path, run_id: str) -> dict[str, Any]:
    return read_json(runs_root(outputs) / run_id / "scheduler.json")


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``."""
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return members
