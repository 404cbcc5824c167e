"""evaltui.slurm reads what Slurm 22.05 really prints: outputs captured from the test
cluster (captured/capture.sh), read here without a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaltui.contract.states import RunState
from evaltui.slurm.commands import error_line
from evaltui.slurm.jobid import SlurmJobId, own_job_id, parse_parsable
from evaltui.slurm.jobinfo import parse_squeue_line
from evaltui.slurm.jobstate import RUN_STATE_OF, SlurmJobState

CAPTURED = Path(__file__).resolve().parent / "captured"
WAITING_FOR_CPUS = ("Resources", "Priority")
"""A job asking for more CPUs than are free: Resources if it is first in line, else
Priority (which one a capture shows depends on the order Slurm looked at them)."""


def out(name: str) -> str:
    return (CAPTURED / f"{name}.out").read_text()


def err(name: str) -> str:
    return (CAPTURED / f"{name}.err").read_text()


def job(name: str) -> int:
    """The job id the capture's sbatch printed."""
    return parse_parsable(out(name)).job


def test_parsable_job_ids() -> None:
    assert parse_parsable(out("sbatch_plain")) == SlurmJobId(job("sbatch_plain"))
    assert parse_parsable("4242;cluster2\n") == SlurmJobId(4242, cluster="cluster2")
    assert parse_parsable("site banner\n77\n") == SlurmJobId(77)
    with pytest.raises(ValueError, match="no job id"):
        parse_parsable("")


@pytest.mark.parametrize(("text", "want"), [
    ("15_1", SlurmJobId(15, task=1)), ("15_[2-5%2]", SlurmJobId(15, tasks="2-5%2")),
    ("16", SlurmJobId(16))])
def test_job_id_round_trips(text: str, want: SlurmJobId) -> None:
    assert SlurmJobId.parse(text) == want
    assert str(want) == text


@pytest.mark.parametrize("bad", ["", "abc", "15_", "15_x", "-3"])
def test_not_a_job_id(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Slurm job id"):
        SlurmJobId.parse(bad)


def test_array_task_names_itself_by_its_array_id() -> None:
    env = {"SLURM_JOB_ID": "19", "SLURM_ARRAY_JOB_ID": "15", "SLURM_ARRAY_TASK_ID": "1"}
    assert str(own_job_id(env)) == "15_1"
    assert str(own_job_id({"SLURM_JOB_ID": "14"})) == "14"
    assert own_job_id({}) is None


def test_squeue_lines_of_a_mixed_queue() -> None:
    lines = out("squeue_mixed").splitlines()
    infos = {str(i.job_id): i for i in map(parse_squeue_line, lines)}
    array, big, gres = job("sbatch_array"), job("sbatch_big"), job("sbatch_gres")
    assert infos[f"{array}_2"].state is SlurmJobState.PENDING
    assert infos[f"{array}_2"].reason == "JobArrayTaskLimit"
    assert infos[f"{array}_0"].state is SlurmJobState.RUNNING
    assert infos[str(big)].reason in WAITING_FOR_CPUS
    assert infos[str(big)].name == "name with spaces"
    assert infos[str(big)].nodes is None
    assert infos[str(gres)].nodes == "n[1-2]"


@pytest.mark.parametrize(("word", "state"), [
    ("PREEMPTED", RunState.ABORTED), ("NODE_FAIL", RunState.ABORTED),
    ("OUT_OF_MEMORY", RunState.FAILED), ("CANCELLED by 0", RunState.CANCELLED),
    ("CONFIGURING", RunState.STARTING), ("COMPLETING", RunState.RUNNING),
    ("REQUEUE_HOLD", RunState.QUEUED)])
def test_states_no_capture_shows(word: str, state: RunState) -> None:
    """States the test cluster cannot produce (no preemption, no memory enforcement)."""
    read = SlurmJobState.read(word)
    assert read is not None and RUN_STATE_OF[read] is state


def test_every_slurm_state_means_a_run_state() -> None:
    assert set(RUN_STATE_OF) == set(SlurmJobState)


def test_a_state_evaltui_does_not_know_is_said_not_guessed() -> None:
    line = out("squeue_mixed").splitlines()[-1].replace("|RUNNING|", "|NEWSTATE|")
    info = parse_squeue_line(line)
    assert info.state is None
    state, reason = info.run_state()
    assert state is RunState.RUNNING and "NEWSTATE" in reason and "does not know" in reason


@pytest.mark.parametrize(("capture", "line"), [
    ("sbatch_bad_partition", "invalid partition specified: nope"),
    ("sbatch_bad_gres", "Requested node configuration is not available"),
    ("sbatch_bad_mem", "Memory specification can not be satisfied"),
    ("sbatch_unknown_gres", "Invalid generic resource (gres) specification"),
    ("sbatch_bad_time", "Invalid --time specification"),
    ("testonly_bad_gres", "Requested node configuration is not available"),
    ("scontrol_unknown", "Invalid job id specified"),
    ("requeue_pending", f"Job is pending execution for job {job('sbatch_plain')}"),
])
def test_error_line_is_slurms_cause_without_prefixes(capture: str, line: str) -> None:
    assert error_line(err(capture)) == line


def test_captures_exit_as_slurm_does() -> None:
    """What the client relies on: refusals exit non-zero; scancel of a forgotten job and
    requeue of a running one exit 0."""
    rc = {p.stem: int(p.read_text()) for p in CAPTURED.glob("*.rc")}
    assert all(rc[n] != 0 for n in ("sbatch_bad_partition", "sbatch_bad_gres",
                                    "testonly_bad_gres", "requeue_pending", "squeue_unknown"))
    assert rc["scancel_unknown"] == 0 and rc["requeue_running"] == 0
