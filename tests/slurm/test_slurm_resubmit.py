"""Where Slurm refuses to requeue a run's job (``--no-requeue``, ``JobRequeue=0``,
``PreemptMode=CANCEL``), the follower -- ``evaltui eval --executor slurm`` on the login
node -- submits it again on the same run dir, and the run completes with every episode
exactly once (evaltui/slurm/resubmit.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

from pool_helpers import starts  # noqa: E402
from runhelpers import episode_rows  # noqa: E402
from slurmcluster import SlurmCluster  # noqa: E402
from test_slurm_submit_run import evaltui_eval, said, started, the_run_dir, walk_job  # noqa: E402, F401
from waiting import wait_until  # noqa: E402

from evaltui.contract.records import (
    DONE_FILENAME,  # noqa: E402
    REQUEUE_REFUSED_FILENAME,  # noqa: E402
)
from evaltui.contract.states import RunState  # noqa: E402
from evaltui.rundir.jsonfiles import read_json  # noqa: E402
from evaltui.rundir.status import read_run_status  # noqa: E402
from evaltui.rundir.store import reset_for_rerun  # noqa: E402
from evaltui.slurm.commands import CLIENT_COMMANDS  # noqa: E402
from evaltui.slurm.jobid import parse_parsable  # noqa: E402
from evaltui.slurm.jobinfo import SlurmJobInfo  # noqa: E402
from evaltui.slurm.resubmit import mark_requeue_refused, resubmit_reason  # noqa: E402


@pytest.mark.slurm
def test_a_job_slurm_will_not_requeue_is_resubmitted_and_completes_once(
        slurm_cluster: SlurmCluster, tmp_path: Path,
        started: list[subprocess.Popen[str]]) -> None:  # noqa: F811
    """USR1, as before a time limit or a preemption, to a job submitted ``--no-requeue``:
    the run stops and asks for a requeue, Slurm refuses, the follower submits a new job
    that runs only the episodes not yet ``ok``."""
    trace = tmp_path / "trace"
    trace.mkdir()
    lengths = [15] * 8
    job = walk_job(tmp_path, lengths, step_sleep_ms=40, trace_dir=str(trace))
    proc = evaltui_eval(started, tmp_path, str(job), "--workers", "2", "--json",
                        "--slurm-arg=--no-requeue")
    run_dir = the_run_dir(tmp_path, proc)
    wait_until(lambda: len(episode_rows(run_dir)) >= 2, timeout=60, what="two episodes done")
    first = read_json(run_dir / "scheduler.json")["slurm_job_id"]
    assert "Requeue=0" in slurm_cluster.run("scontrol", "show", "job", first).stdout
    slurm_cluster.run("scancel", "--signal=USR1", "--batch", first)
    out = proc.stdout.read()  # type: ignore[union-attr]
    assert proc.wait(timeout=120) == 0, said(proc)
    assert json.loads(out)["state"] == "done"
    record = read_json(run_dir / "scheduler.json")
    second = record["slurm_job_id"]
    assert second != first and record["slurm_earlier_job_ids"] == [first]
    assert f"resubmitted: Slurm would not requeue job {first}: " in said(proc)
    assert f"Slurm job {second}" in said(proc)
    assert not (run_dir / REQUEUE_REFUSED_FILENAME).exists()
    rows = {r["episode_index"]: r for r in episode_rows(run_dir)}
    assert sorted(rows) == list(range(len(lengths)))
    assert all(r["status"] == "ok" for r in rows.values())
    assert read_json(run_dir / "summary.json")["counts_by_status"] == {"ok": len(lengths)}
    for index, row in rows.items():  # each started once, or again in the new job
        assert row["attempts"] == starts(trace)[f"walk-{index:04d}"], (index, row)
    assert max(r["attempts"] for r in rows.values()) == 2  # the stop cut some short
    assert "JobState=COMPLETED" in slurm_cluster.run("scontrol", "show", "job", second).stdout


def ended_run(tmp_path: Path, status: str) -> Path:
    run_dir = tmp_path / "20260101_000000"
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text(json.dumps({"status": status}))
    (run_dir / DONE_FILENAME).touch()
    return run_dir


def job(state: str) -> SlurmJobInfo:
    return SlurmJobInfo(job_id=parse_parsable("7"), state_word=state, reason="None")


def test_only_an_unfinished_run_slurm_will_not_bring_back_is_resubmitted(
        tmp_path: Path) -> None:
    """No cluster: the follower's decision, from the run dir and Slurm's last word."""
    stopped = ended_run(tmp_path / "a", "cancelled")
    assert resubmit_reason(stopped, job("FAILED")) is None  # a run that just ended
    assert resubmit_reason(stopped, job("CANCELLED")) is None  # scancel: the user's
    assert resubmit_reason(stopped, None) is None
    mark_requeue_refused(stopped, "Slurm would not requeue job 7: disabled\n")
    assert resubmit_reason(stopped, job("FAILED")) == "Slurm would not requeue job 7: disabled"
    reset_for_rerun(stopped)  # the one reset a resubmission goes through
    assert not (stopped / DONE_FILENAME).exists()
    assert not (stopped / REQUEUE_REFUSED_FILENAME).exists()
    preempted = ended_run(tmp_path / "b", "cancelled")  # PreemptMode=CANCEL: SIGTERM, ended
    assert resubmit_reason(preempted, job("PREEMPTED")) == (
        "Slurm job 7: PREEMPTED (None), not requeued")
    done = ended_run(tmp_path / "c", "done")  # the signal came after the last episode
    mark_requeue_refused(done, "Slurm would not requeue job 7: disabled")
    assert resubmit_reason(done, job("PREEMPTED")) is None


@pytest.mark.slurm
def test_a_resubmission_slurm_refuses_leaves_the_run_as_it_ended(
        slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        started: list[subprocess.Popen[str]]) -> None:  # noqa: F811
    """sbatch gone from the login node's PATH after the first submission: the follower
    says why it did not resubmit, and the run reads as its job left it (cancelled)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in CLIENT_COMMANDS:
        (bin_dir / name).symlink_to(shutil.which(name) or name)
    monkeypatch.setenv("PATH", str(bin_dir))
    job = walk_job(tmp_path, [15] * 6, step_sleep_ms=40)
    proc = evaltui_eval(started, tmp_path, str(job), "--workers", "2",
                        "--slurm-arg=--no-requeue")
    run_dir = the_run_dir(tmp_path, proc)
    wait_until(lambda: len(episode_rows(run_dir)) >= 1, timeout=60, what="an episode done")
    (bin_dir / "sbatch").unlink()
    first = read_json(run_dir / "scheduler.json")["slurm_job_id"]
    slurm_cluster.run("scancel", "--signal=USR1", "--batch", first)
    assert proc.wait(timeout=120) == 130, said(proc)
    assert ("not resubmitted: Slurm is not available here: sbatch not found on PATH"
            in said(proc))
    assert read_run_status(run_dir).state is RunState.CANCELLED
    assert (run_dir / DONE_FILENAME).exists()
    assert read_json(run_dir / "scheduler.json")["slurm_job_id"] == first
