"""A Slurm run's run dir read where no cluster is (everywhere): a backend never takes it
for a queued run of its own, and without squeue the run dir's word stands, said so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaltui.contract.states import RunState
from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.rundir.status import read_run_status
from evaltui.scheduler.runs.restore import classify
from evaltui.slurm.follow import SlurmQueue, follow_status


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


class CapturedQueue(SlurmQueue):
    """Slurm's queue as squeue printed it (lines of SQUEUE_FORMAT): a TIMEOUT takes a
    minute or more on the test cluster, a NODE_FAIL a lost node; their reading is the
    same code."""

    def __init__(self, *lines: str) -> None:
        super().__init__()
        self.lines = lines

    def _read(self, now: float) -> None:
        from evaltui.slurm.jobinfo import parse_squeue_line

        self._taken_at, self._why_not = now, None
        self._jobs = {str(i.job_id): i for i in map(parse_squeue_line, self.lines)}


@pytest.mark.parametrize(("line", "state", "note"), [
    ("42|42|N/A|PENDING|Priority|(null)|evaltui-x", RunState.QUEUED,
     "Slurm job 42: PENDING (Priority)"),
    ("42|42|N/A|PENDING|Resources|(null)|evaltui-x", RunState.QUEUED,
     "Slurm job 42: PENDING (Resources)"),
    ("42|42|N/A|RUNNING|None|n1|evaltui-x", RunState.RUNNING, None),
    ("42|42|N/A|TIMEOUT|TimeLimit|n1|evaltui-x", RunState.ABORTED,
     "Slurm job 42: TIMEOUT (TimeLimit)"),
    ("42|42|N/A|PREEMPTED|None|n1|evaltui-x", RunState.ABORTED, "Slurm job 42: PREEMPTED"),
    ("42|42|N/A|NODE_FAIL|NodeDown|n2|evaltui-x", RunState.ABORTED,
     "Slurm job 42: NODE_FAIL (NodeDown)"),
    ("42|42|N/A|OUT_OF_MEMORY|OutOfMemory|n1|evaltui-x", RunState.FAILED,
     "Slurm job 42: OUT_OF_MEMORY (OutOfMemory)"),
    ("42|42|N/A|CANCELLED|None|n1|evaltui-x", RunState.CANCELLED, "Slurm job 42: CANCELLED"),
    ("42|42|N/A|COMPLETED|None|n1|evaltui-x", RunState.ABORTED,
     "Slurm job 42: COMPLETED, but the run left no _DONE"),
])
def test_slurms_state_maps_onto_the_runs_with_its_word(
        tmp_path: Path, line: str, state: RunState, note: str | None) -> None:
    run_dir = slurm_run_dir(tmp_path, summary=True)
    status = follow_status(run_dir, read_run_status(run_dir), CapturedQueue(line))
    assert (status.state, status.note) == (state, note)


def test_the_run_dirs_last_word_wins_over_slurm(tmp_path: Path) -> None:
    run_dir = slurm_run_dir(tmp_path, summary=True)
    write_json_atomic(run_dir / "summary.json", {"run_id": run_dir.name, "status": "done"})
    (run_dir / "_DONE").touch()
    queue = CapturedQueue("42|42|N/A|RUNNING|None|n1|evaltui-x")  # squeue lags behind
    read = read_run_status(run_dir)
    assert follow_status(run_dir, read, queue) is read and read.state is RunState.DONE
