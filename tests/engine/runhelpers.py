"""Helpers for tests that run the real run subprocess: spawn, wait with a deadline, reap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evaltui.procs.spawn import spawn_run
from evaltui.rundir.jsonfiles import read_json

# tests/ holds the suite-wide helpers; driver scripts run from their own folder need it too.
_TESTS_DIR = str(Path(__file__).resolve().parents[1])
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
from runprep import prepare_run  # noqa: E402  (tests/ on the path: also in subprocesses)
from waiting import wait_until as _wait_until  # noqa: E402

ENGINE_TESTS = Path(__file__).resolve().parent
GRAPHS = ENGINE_TESTS.parents[1] / "evaltui" / "graphs"


def builtin_graph(name: str, **param_overrides: Any) -> dict[str, Any]:
    graph = json.loads((GRAPHS / f"{name}.json").read_text())
    for key, value in param_overrides.items():
        nodeset, param = key.split("__")
        graph["nodesets"][nodeset]["params"][param] = value
    return graph


def write_corridor_dataset(path: Path, goals: list[int]) -> Path:
    with open(path, "w") as fh:
        for i, goal in enumerate(goals):
            ref = [[float(x), 0.0] for x in range(0, goal + 1)] if goal >= 0 else \
                  [[float(-x), 0.0] for x in range(0, -goal + 1)]
            fh.write(json.dumps({"episode_id": f"corr-{i}", "scene_id": f"len{abs(goal)}",
                                 "instruction": f"walk to {goal}", "goal": goal,
                                 "reference_path": ref,
                                 "geodesic_distance": float(abs(goal))}) + "\n")
    return path


@contextmanager
def running(spec: dict[str, Any], outputs: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """Prepare and spawn a run; on exit make sure its whole process group is gone."""
    run_dir, _ = prepare_run(spec, outputs)
    proc = spawn_run(run_dir)
    try:
        yield run_dir, proc
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)


def run_to_end(spec: dict[str, Any], outputs: Path, timeout: float = 120) -> Path:
    with running(spec, outputs) as (run_dir, proc):
        proc.wait(timeout=timeout)
        return run_dir



def wait_until(cond: Callable[[], Any], timeout: float = 30, what: str = "condition") -> Any:
    """:func:`tests.waiting.wait_until` with this folder's default deadline."""
    return _wait_until(cond, timeout, what)


def episode_rows(run_dir: Path) -> list[dict[str, Any]]:
    return [read_json(p) for p in sorted(run_dir.glob("episodes/ep*/episode.json"))]


def finished_count(run_dir: Path) -> int:
    return sum(1 for _ in run_dir.glob("episodes/ep*/episode.json"))


TIMING_FIELDS = {"elapsed_sec", "finished_at", "run_id", "worker_id", "node"}  # + where it ran


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in TIMING_FIELDS}
