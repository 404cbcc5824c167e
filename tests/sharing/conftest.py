"""Real run dirs for the report and export tests, made once per session.

Short real runs of the BabyAI expert on GoToLocal through ``evaltui eval``: one clean,
one whose policy crashes on two episodes (``tests/engine/crashy_nodesets.py``), so the
errors-as-failures rule is exercised by the real engine, not by hand-written rows. Tests
copy a run before they damage it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE_TESTS = ROOT / "tests" / "engine"
CRASH_ON = ["GoToLocal-0001", "GoToLocal-0004"]


def eval_run(base: Path, *args: str, graph: dict | None = None) -> Path:
    """Run ``evaltui eval`` to its end under ``base``; the run dir it wrote."""
    env = {**os.environ, "EVALTUI_STATE_DIR": str(base / "state"),
           "EVALTUI_OUTPUTS": str(base / "o")}
    target = "bot"
    if graph is not None:
        (base / "graph.json").write_text(json.dumps(graph))
        target = str(base / "graph.json")
    proc = subprocess.run(
        [sys.executable, "-m", "evaltui.cli", "eval", target, "--outputs", str(base / "o"),
         "--workspace", str(ENGINE_TESTS), "--split", "GoToLocal", *args],
        capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
    runs = sorted((base / "o" / "eval_runs").iterdir())
    assert runs and (runs[-1] / "_DONE").exists(), proc.stderr[-3000:]
    return runs[-1]


def crashy_graph() -> dict:
    graph = json.loads((ROOT / "evaltui" / "graphs" / "bot.json").read_text())
    graph["nodesets"]["policy"] = {"impl": "crashy_nodesets:CrashyBot",
                                   "parallelism": "inline", "params": {"crash_on": CRASH_ON}}
    return graph


@pytest.fixture(scope="session")
def ok_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 GoToLocal episodes of the expert, 2 workers, frames on."""
    return eval_run(tmp_path_factory.mktemp("ok_run"), "--episodes", "6", "--workers", "2")


@pytest.fixture(scope="session")
def errored_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 episodes, the policy crashing on episodes 1 and 4 (status error)."""
    return eval_run(tmp_path_factory.mktemp("errored_run"), "--episodes", "6",
                    "--max-error-rate", "1", graph=crashy_graph())


@pytest.fixture
def copy_run(tmp_path: Path):
    """``copy_run(run_dir)``: a copy of a session run that a test may damage."""
    def copy(run_dir: Path) -> Path:
        target = tmp_path / "runs" / run_dir.name
        shutil.copytree(run_dir, target)
        return target
    return copy


@pytest.fixture(scope="session")
def real_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real set through ``evaltui set run``: the shipped model at two checkpoints (its
    weights, and the same with the output layer negated: an 'early' one) on two splits,
    4 episodes each, no frames (GoToObjMaze episodes run to their 576-step limit: GIFs of
    them would be most of the exports' time); the baseline is the trained checkpoint on
    GoToLocal. Its set dir."""
    import numpy as np
    import yaml

    from evaltui.benchmarks.babyai.model import DEFAULT_WEIGHTS, save_weights

    base = tmp_path_factory.mktemp("real_set")
    (base / "ckpts").mkdir()
    with np.load(DEFAULT_WEIGHTS) as data:
        arrays = {k: data[k] for k in data.files}
    save_weights(base / "ckpts" / "policy_000200.npz", arrays)
    last = f"w{int(arrays['layers']) - 1}"
    save_weights(base / "ckpts" / "policy_000100.npz", {**arrays, last: -arrays[last]})
    (base / "set.yaml").write_text(yaml.safe_dump({
        "name": "curve", "base": {"graph": "model", "episodes": 4, "workers": 1,
                                  "set": {"env.frame_stride": 0}},
        "matrix": {"split": ["GoToLocal", "GoToObjMaze"],
                   "checkpoint": {"glob": "ckpts/*.npz", "param": "policy.weights"}},
        "baseline": {"step": 200, "split": "GoToLocal"}}))
    env = {**os.environ, "EVALTUI_STATE_DIR": str(base / "state"),
           "EVALTUI_OUTPUTS": str(base / "o")}
    env.pop("BACKEND_URL", None)
    proc = subprocess.run([sys.executable, "-m", "evaltui.cli", "set", "run",
                           str(base / "set.yaml"), "--outputs", str(base / "o")],
                          capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return base / "o" / "eval_sets" / "curve"
