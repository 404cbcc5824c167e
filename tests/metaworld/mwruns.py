"""``evaltui eval`` of the Meta-World graphs as a user runs it, and reading its rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("metaworld", reason="metaworld is not installed "
                    "(pip install 'evaltui[metaworld]')")


def evaltui(*args: str, outputs: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    where = ["--outputs", str(outputs)] if outputs is not None else []
    return subprocess.run([sys.executable, "-m", "evaltui.cli", *args, *where],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def eval_run(outputs: Path, *args: str, env: dict[str, str] | None = None) -> Path:
    """The run dir of a finished ``evaltui eval ARGS`` in an outputs root of its own (what
    the command said on stderr kept beside it, in ``outputs/eval.stderr``)."""
    proc = evaltui("eval", *args, outputs=outputs, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (outputs / "eval.stderr").write_text(proc.stderr)
    [run] = (outputs / "eval_runs").iterdir()
    return run


def rows(run_dir: Path) -> list[dict[str, Any]]:
    """The run's episode rows, without what differs between two runs of the same episodes."""
    summary = json.loads((run_dir / "summary.json").read_text())
    keep = ("episode_index", "episode_id", "task", "seed", "metrics", "step_count", "status")
    return sorted(({k: row.get(k) for k in keep} for row in summary["episodes"]),
                  key=lambda r: r["episode_index"])
