"""A finished run made the way a new user makes one (``python -m evaltui.cli eval bot``),
and a loopback URL where nothing listens: what the CLI tests of a first hour share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ports import free_port


def finished_bot_run(tmp_path_factory: pytest.TempPathFactory, episodes: int,
                     name: str = "outputs") -> Path:
    """The run dir of a real ``eval bot --episodes N`` in an outputs root of its own.

    For module-scoped fixtures: they are made before the suite's per-test isolation, so
    the run gets a state dir of its own."""
    outputs = tmp_path_factory.mktemp(name)
    env = {**os.environ, "EVALTUI_STATE_DIR": str(tmp_path_factory.mktemp(f"{name}-state"))}
    proc = subprocess.run([sys.executable, "-m", "evaltui.cli", "eval", "bot", "--episodes",
                           str(episodes), "--outputs", str(outputs)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    [run] = (outputs / "eval_runs").iterdir()
    return run


def nothing_listens_url() -> str:
    """``http://127.0.0.1:PORT`` of a port just bound and let go: nothing answers there."""
    return f"http://127.0.0.1:{free_port()}"
