"""Specs, waiting and process cleanup for the API tests."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaltui.graphs import builtin_graph_path
from evaltui.rundir import PidRef, read_json, runs_root


def bot_spec(episodes: int = 2, *, latency_ms: int = 0, priority: int = 0,
             vram_mb: int = 0, exclusive: bool = False) -> dict[str, Any]:
    """The built-in expert bot on the first BabyAI GoToLocal episodes (~1 s a run)."""
    graph = json.loads(builtin_graph_path("bot").read_text())  # type: ignore[union-attr]
    ev: dict[str, Any] = {"episode_count": episodes}
    if latency_ms:
        ev["selectors"] = {"env.sim_latency_ms": latency_ms}
    return {"graph": graph, "eval": ev,
            "scheduling": {"priority": priority, "marginal_vram_mb": vram_mb,
                           "exclusive_gpu": exclusive}}


def wait_until(cond: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_runs(outputs: Path) -> None:
    """SIGKILL the process group of every live run under ``outputs``."""
    root = runs_root(outputs)
    if not root.is_dir():
        return
    for run_dir in root.iterdir():
        try:
            rec = read_json(run_dir / "scheduler.json")
        except (OSError, ValueError):
            continue
        pid, ctime = rec.get("pid"), rec.get("pid_create_time")
        if isinstance(pid, int) and isinstance(ctime, int | float) and \
                PidRef(pid, float(ctime)).alive():
            kill_group(pid)


def kill_backends(state: Path) -> None:
    """SIGKILL the backends `evaltui run` started under a state dir (by their pid files)."""
    for path in (state / "backends").glob("*.pid"):
        try:
            data = read_json(path)
            ref = PidRef(int(data["pid"]), float(data["create_time"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if ref.alive():
            kill_group(ref.pid)
        try:
            os.waitpid(ref.pid, os.WNOHANG)
        except ChildProcessError:
            pass
