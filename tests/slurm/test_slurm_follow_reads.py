"""A Slurm run's run dir read where no cluster is (everywhere): a backend never takes it
for a queued run of its own, and without squeue the run dir's word stands, said so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaltui.rundir import read_run_status, write_json_atomic
from evaltui.scheduler.runs.restore import classify
from evaltui.slurm.follow import SlurmQueue, follow_status
from evaltui.states import RunState


def slurm_run_dir(tmp_path: Path, summary: bool) -> Path:
    run_dir = tmp_path / "20260101_000000"
    run_dir.mkdir()
    write_json_atomic(run_dir / "scheduler.json", {
        "state": "queued", "queued_at": "2026-01-01T00:00:00.000+00:00",
        "slurm_job_id": "42", "slurm_cluster": "c"})
    if summary:
        write_json_atomic(run_dir / "summary.json", {"run_id": run_dir.name,
                                                     "status": "running"})
    return run_dir


def test_a_backend_never_claims_a_slurm_run_as_its_queued_run(tmp_path: Path) -> None:
    run_dir = slurm_run_dir(tmp_path, summary=False)
    record = json.loads((run_dir / "scheduler.json").read_text())
    assert classify(run_dir, record) is None  # before: Found.QUEUED, run on this machine
    del record["slurm_job_id"]
    assert classify(run_dir, record) is not None


@pytest.mark.parametrize("summary", [False, True])
def test_without_squeue_the_run_dirs_word_stands(tmp_path: Path, summary: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    run_dir = slurm_run_dir(tmp_path, summary)
    queue = SlurmQueue()
    status = follow_status(run_dir, read_run_status(run_dir), queue)
    assert status.state is (RunState.RUNNING if summary else RunState.QUEUED)
    assert status.note == ("Slurm job 42: not asked (squeue not found on PATH); the state is "
                           "the run dir's")
    assert queue.calls == 0
