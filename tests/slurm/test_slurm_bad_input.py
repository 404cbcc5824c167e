"""Bad input to ``evaltui eval --executor slurm``, one clear line each: an unsatisfiable
gres (exit 2, no run dir, no job), sbatch alone missing from PATH (exit 2, nothing
written), and a time limit that cannot fit one episode (a warning; the run goes on).
The unknown partition is in test_slurm_submit_run.py, the client's refusals in
test_slurm_client.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

from pool_helpers import walk_graph, write_dataset  # noqa: E402
from runhelpers import ENGINE_TESTS  # noqa: E402
from slurmcluster import GPUS_PER_NODE, SlurmCluster  # noqa: E402
from test_slurm_submit_run import evaltui_eval, said, started, the_run_dir, walk_job  # noqa: E402, F401
from waiting import wait_until  # noqa: E402

from evaltui.contract.slurmoptions import SlurmOptions  # noqa: E402
from evaltui.slurm.commands import CLIENT_COMMANDS  # noqa: E402
from evaltui.slurm.episodetime import (  # noqa: E402
    budget_episode,
    measured_episode,
    signal_offset,
    time_limit_warning,
)
from evaltui.slurm.submit import DEFAULT_SIGNAL  # noqa: E402


@pytest.mark.slurm
def test_an_unsatisfiable_gres_is_one_line_and_submits_nothing(
        slurm_cluster: SlurmCluster, tmp_path: Path,
        started: list[subprocess.Popen[str]]) -> None:  # noqa: F811
    job = walk_job(tmp_path, [3, 3])
    proc = evaltui_eval(started, tmp_path, str(job), "--slurm-gres", "gpu:99")
    assert proc.wait(timeout=60) == 2
    proc.stdout.read()  # type: ignore[union-attr]
    wait_until(lambda: said(proc), timeout=5, what="eval's error")
    assert said(proc) == (
        "error: eval.slurm.gres: no node of partition (default) can hold one worker "
        f"(1 CPU(s), gres gpu:99); its nodes have at most 4 CPUs, 4096 MB, gres: "
        f"gpu:{GPUS_PER_NODE}")
    assert list((tmp_path / "out").glob("eval_runs/*")) == []
    assert not slurm_cluster.run("squeue", "--noheader").stdout.strip()


def test_without_sbatch_alone_eval_names_it_and_writes_nothing(tmp_path: Path) -> None:
    """Every other Slurm command on PATH (a login node with a broken install): the line
    names sbatch only. No cluster needed: nothing is run before the check."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in CLIENT_COMMANDS:
        if name != "sbatch":
            (bin_dir / name).write_text("#!/bin/sh\nexit 1\n")
            (bin_dir / name).chmod(0o755)
    out = tmp_path / "outputs"
    done = subprocess.run(
        [sys.executable, "-m", "evaltui.cli", "--outputs", str(out), "eval", "bot",
         "--dataset", "babyai", "--episodes", "2", "--executor", "slurm"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PATH": str(bin_dir)}, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert (done.stdout + done.stderr).strip().splitlines() == [
        "error: eval.executor: Slurm is not available here: sbatch not found on PATH (run "
        "from a Slurm login node, or install Slurm's client commands)"]
    assert not out.exists()


@pytest.mark.slurm
def test_a_time_limit_shorter_than_one_episode_warns_and_the_run_goes_on(
        slurm_cluster: SlurmCluster, tmp_path: Path,
        started: list[subprocess.Popen[str]]) -> None:  # noqa: F811
    """--slurm-time 2 is 120 s, USR1 at 90 s before the end: 30 s for episodes that may
    take 1 s x 64 steps. Warned, not refused: the run is submitted and ends done."""
    job = tmp_path / "job.json"
    job.write_text(json.dumps({
        "graph": walk_graph(), "active_workspace_dir": str(ENGINE_TESTS),
        "eval": {"dataset": str(write_dataset(tmp_path / "walk.jsonl", [3, 3])),
                 "executor": "slurm", "per_step_budget_sec": 1, "step_budget": 64}}))
    proc = evaltui_eval(started, tmp_path, str(job), "--slurm-time", "2", "--json")
    the_run_dir(tmp_path, proc)
    out = proc.stdout.read()  # type: ignore[union-attr]
    assert proc.wait(timeout=90) == 0, said(proc)
    assert json.loads(out)["state"] == "done"
    assert ("warning: eval.slurm.time: 2 (120 s; the run is told to stop 90 s before it) "
            "is shorter than one episode's expected 64 s (per_step_budget_sec 1 x "
            "step_budget 64); no episode could finish within it") in said(proc)
    # the same run again: now measured (a fraction of a second), nothing to warn about
    proc = evaltui_eval(started, tmp_path, str(job), "--slurm-time", "2", "--json")
    out = proc.stdout.read()  # type: ignore[union-attr]
    assert proc.wait(timeout=90) == 0, said(proc)
    assert "warning: eval.slurm.time" not in said(proc)


def earlier_run(runs: Path, name: str, graph: str, elapsed: list[float],
                status: str = "ok") -> None:
    (runs / name).mkdir(parents=True)
    (runs / name / "summary.json").write_text(json.dumps({
        "graph_name": graph, "dataset": "babyai", "split": "GoToLocal",
        "episodes": [{"status": status, "elapsed_sec": s} for s in elapsed]}))


def test_an_earlier_runs_longest_episode_is_the_expected_length(tmp_path: Path) -> None:
    runs = tmp_path / "eval_runs"
    earlier_run(runs, "20260101_000000", "babyai-bot", [10.0, 50.0])
    earlier_run(runs, "20260102_000000", "babyai-bot", [20.0, 40.0, 5.0])
    earlier_run(runs, "20260103_000000", "babyai-bot", [900.0], status="error")
    earlier_run(runs, "20260104_000000", "other", [900.0])
    got = measured_episode(runs, "babyai-bot", "babyai", "GoToLocal",
                           exclude="20260105_000000")
    assert got is not None and got.seconds == 40.0  # the newest matching run's ok rows
    assert got.basis == "the longest episode of run 20260102_000000"
    assert measured_episode(runs, "babyai-bot", "babyai", "GoTo") is None
    options = SlurmOptions(time="2")
    assert time_limit_warning(options, got, signal_offset(DEFAULT_SIGNAL)) == (
        "eval.slurm.time: 2 (120 s; the run is told to stop 90 s before it) is shorter "
        "than one episode's expected 40 s (the longest episode of run 20260102_000000); "
        "no episode could finish within it")
    assert time_limit_warning(SlurmOptions(time="3"), got, 90) is None  # 90 s left
    assert time_limit_warning(options, None, 90) is None  # nothing known: nothing said
    assert budget_episode(None, 64) is None
    assert signal_offset("B:USR1") == 60 and signal_offset(None) == 0
