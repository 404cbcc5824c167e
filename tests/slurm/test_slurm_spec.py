"""``eval.executor: "slurm"`` and ``eval.slurm`` in the spec and on the command line
(DESIGN §12), and the one line a machine without Slurm answers. No cluster needed."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaltui.commands.eval import add_spec_arguments
from evaltui.commands.evalspec import spec_from_args
from evaltui.contract.spec import SpecError, parse_spec


def parsed(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_spec_arguments(p)
    return p.parse_args(list(argv))


def test_the_slurm_options_land_in_eval_slurm() -> None:
    spec = spec_from_args(parsed(
        "bot", "--dataset", "babyai", "--executor", "slurm", "--slurm-partition", "main",
        "--slurm-time", "1:30:00", "--slurm-cpus-per-worker", "2",
        "--slurm-mem-per-worker", "1500", "--slurm-arg=--constraint=v100"))
    assert spec["eval"]["executor"] == "slurm"
    assert spec["eval"]["slurm"] == {"partition": "main", "time": "1:30:00",
                                     "cpus_per_worker": 2, "mem_per_worker_mb": 1500,
                                     "extra_args": ["--constraint=v100"]}
    slurm = parse_spec(spec).eval.slurm
    assert (slurm.partition, slurm.time_limit_seconds(), slurm.qos) == ("main", 5400, None)


def test_the_command_line_overrides_the_spec_files_slurm_fields(tmp_path: Path) -> None:
    job = tmp_path / "job.json"
    job.write_text('{"graph": "bot", "eval": {"dataset": "babyai", "executor": "slurm", '
                   '"slurm": {"partition": "gpu", "account": "lab"}}}')
    spec = spec_from_args(parsed(str(job), "--slurm-partition", "main"))
    assert spec["eval"]["slurm"] == {"partition": "main", "account": "lab"}


def test_a_bad_slurm_field_is_named() -> None:
    with pytest.raises(SpecError, match=r"^eval\.slurm\.time: .*not a Slurm time"):
        parse_spec({"graph": {}, "eval": {"executor": "slurm", "slurm": {"time": "soon"}}})
    with pytest.raises(SpecError, match=r"^eval\.slurm\.nodes: "):
        parse_spec({"graph": {}, "eval": {"executor": "slurm", "slurm": {"nodes": 2}}})


def test_eval_without_slurm_says_what_is_missing_and_writes_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    out = tmp_path / "outputs"
    done = subprocess.run(
        [sys.executable, "-m", "evaltui.cli", "--outputs", str(out), "eval", "bot",
         "--dataset", "babyai", "--episodes", "2", "--executor", "slurm"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PATH": str(empty)}, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert lines == ["error: eval.executor: Slurm is not available here: sbatch, squeue, "
                     "scontrol, scancel, srun, sinfo not found on PATH (run from a Slurm "
                     "login node, or install Slurm's client commands)"]
    assert not out.exists()


def test_submit_to_a_backend_without_slurm_is_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The backend's machine has no Slurm: its refusal, one line, exit 2, nothing queued
    (the client needs no Slurm itself: a backend with Slurm submits the job, see
    test_slurm_follow.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
    from apihelpers import isolate_env, start_backend

    from evaltui.cli import main

    env = isolate_env(tmp_path, monkeypatch)
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # neither here nor on the backend's machine
    served = start_backend()
    try:
        code = main(["submit", "bot", "--dataset", "babyai", "--episodes", "2",
                     "--executor", "slurm", "--url", served.url])
    finally:
        served.stop()
    out, err = capsys.readouterr()
    assert code == 2, err
    assert (out + err).strip().splitlines() == [
        "error: eval.executor: Slurm is not available here: sbatch, squeue, scontrol, "
        "scancel, srun, sinfo not found on PATH (run from a Slurm login node, or install "
        "Slurm's client commands)"]
    assert not any(env["outputs"].iterdir())
