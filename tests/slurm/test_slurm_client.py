"""evaltui.slurm against the real test cluster: submission from SlurmOptions, following a
job, refusals as one line naming the field, cancel, signal, requeue, arrays."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest
from scontrol import queue, show_job
from slurmcluster import (
    CPUS_PER_NODE,
    GPUS_PER_NODE,
    MEMORY_MB_PER_NODE,
    PARTITION,
    SLURMD_TIMEOUT_S,
    SlurmCluster,
)
from waiting import wait_until

from evaltui.contract.slurmoptions import SlurmOptions
from evaltui.contract.states import RunState
from evaltui.slurm.commands import run_slurm
from evaltui.slurm.control import RequeueRefused, cancel, requeue
from evaltui.slurm.jobid import SlurmJobId
from evaltui.slurm.jobinfo import SQUEUE_FORMAT, SlurmJobInfo, parse_squeue_line
from evaltui.slurm.jobstate import SlurmJobState
from evaltui.slurm.submit import BatchJob, SlurmRefused, check_submittable, submit

pytestmark = pytest.mark.slurm
NODE = (f"its nodes have at most {CPUS_PER_NODE} CPUs, {MEMORY_MB_PER_NODE} MB, "
        f"gres: gpu:{GPUS_PER_NODE}")


def info(job: SlurmJobId) -> SlurmJobInfo:
    (found,) = show_job(job)
    return found


def in_state(job: SlurmJobId, state: SlurmJobState, timeout: float = 20) -> SlurmJobInfo:
    return wait_until(lambda: (i := info(job)).state is state and i, timeout, f"{job} {state}")


def batch(tmp_path: Path, script: str, **kw) -> BatchJob:
    return BatchJob(command=["bash", "-c", script], job_name="evt-test",
                    output=tmp_path / "job-%j.out", chdir=tmp_path, **kw)


def names_in_queue(name: str) -> list[str]:
    return [str(i.job_id) for i in queue_all() if i.name == name]


def queue_all() -> list[SlurmJobInfo]:
    done = run_slurm(["squeue", "--noheader", "--array", f"--format={SQUEUE_FORMAT}"])
    return [parse_squeue_line(ln) for ln in done.stdout.splitlines() if ln.strip()]


def test_submitted_job_runs_with_the_options_and_ends_done(
        slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    options = SlurmOptions(partition=PARTITION, time="5", cpus_per_worker=2,
                           mem_per_worker_mb=300, account="lab", qos="normal")
    job = submit(options, batch(tmp_path, "echo tasks=$SLURM_NTASKS cpt=$SLURM_CPUS_PER_TASK",
                                tasks=2))
    done = in_state(job, SlurmJobState.COMPLETED)
    assert done.run_state() == (RunState.DONE, f"Slurm job {job}: COMPLETED")
    assert done.time_limit_s == 300
    assert (tmp_path / f"job-{job}.out").read_text() == "tasks=2 cpt=2\n"
    line = slurm_cluster.run("scontrol", "show", "job", "--oneliner", str(job)).stdout
    # (QOS reads (null): without accounting (slurmdbd) Slurm takes any and keeps none)
    for want in ("NumCPUs=4", "MinMemoryCPU=150M", "Account=lab",
                 "Requeue=1", f"Partition={PARTITION}"):
        assert f" {want} " in line, want
    assert queue(job) == [] or queue(job)[0].state is SlurmJobState.COMPLETED


def test_pending_job_reads_queued_with_slurms_reason(
        slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    full = SlurmOptions(cpus_per_worker=4)
    hogs = [submit(full, batch(tmp_path, "sleep 300", tasks=1)) for _ in range(2)]
    waiting = submit(full, batch(tmp_path, "true"))
    try:
        # Slurm gives a reason at its next scheduling pass; until then it reads "None".
        (pending,) = wait_until(lambda: q if (q := queue(waiting)) and q[0].reason not in
                                (None, "", "None") else None, 10, "the job's pending reason")
        assert pending.state is SlurmJobState.PENDING
        state, reason = pending.run_state()
        assert state is RunState.QUEUED
        assert reason in (f"Slurm job {waiting}: PENDING (Resources)",
                          f"Slurm job {waiting}: PENDING (Priority)")
    finally:
        for job in [*hogs, waiting]:
            cancel(job)


@pytest.mark.parametrize(("options", "message", "tasks"), [
    (SlurmOptions(partition="nope"),
     f"eval.slurm.partition: Slurm has no partition 'nope' (it has: {PARTITION})", 1),
    (SlurmOptions(gres=f"gpu:{GPUS_PER_NODE + 1}"),
     f"eval.slurm.gres: no node of partition (default) can hold one worker (1 CPU(s), gres "
     f"gpu:{GPUS_PER_NODE + 1}); {NODE}", 1),
    (SlurmOptions(gres="tpu:1"),
     f"eval.slurm.gres: Slurm knows no gres 'tpu:1' (its nodes have: gpu:{GPUS_PER_NODE})",
     1),
    (SlurmOptions(mem_per_worker_mb=100_000),
     f"eval.slurm.mem_per_worker_mb: no node of partition (default) can hold one worker "
     f"(1 CPU(s), 100000 MB); {NODE}", 1),
    (SlurmOptions(partition=PARTITION, cpus_per_worker=CPUS_PER_NODE + 1),
     f"eval.slurm.cpus_per_worker: no node of partition {PARTITION} can hold one worker "
     f"({CPUS_PER_NODE + 1} CPU(s)); {NODE}", 1),
    (SlurmOptions(cpus_per_worker=2),
     f"eval.worker_count: {CPUS_PER_NODE + 1} workers of 2 CPU(s) need "
     f"{2 * CPUS_PER_NODE + 2} CPUs; partition (default) has {2 * CPUS_PER_NODE}",
     CPUS_PER_NODE + 1),
])
def test_refusal_is_one_line_naming_the_field_and_submits_nothing(
        slurm_cluster: SlurmCluster, tmp_path: Path, options: SlurmOptions,
        message: str, tasks: int) -> None:
    job = BatchJob(command=["true"], job_name="evt-refused", output=tmp_path / "o",
                   tasks=tasks)
    with pytest.raises(SlurmRefused) as checked:
        check_submittable(options, job)
    with pytest.raises(SlurmRefused) as submitted:
        submit(options, job)
    assert str(checked.value) == str(submitted.value) == message
    assert names_in_queue("evt-refused") == []


def test_check_submittable_says_where_it_would_run(slurm_cluster: SlurmCluster,
                                                   tmp_path: Path) -> None:
    answer = check_submittable(SlurmOptions(gres="gpu:1"),
                               BatchJob(command=["true"], job_name="evt-dry",
                                        output=tmp_path / "o"))
    assert answer.startswith("Job ") and " to start at " in answer
    assert answer.endswith(f"in partition {PARTITION}")
    assert names_in_queue("evt-dry") == []


def test_signal_to_the_batch_step_or_the_other_steps_then_cancel(
        slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """``batch_only`` signals the run process and not its worker steps; without it,
    Slurm signals the steps and not the batch step (what the executor's stop relies on)."""
    marks = tmp_path / "marks"
    loop = "while true; do sleep 0.1; done"
    step = f"trap 'echo step >> {marks}' USR1; echo step-up >> {marks}; {loop}"
    job = submit(SlurmOptions(), batch(
        tmp_path, f"trap 'echo batch >> {marks}' USR1; "
                  f"srun --exact -n1 bash -c {shlex.quote(step)} & {loop}", tasks=2))

    def lines() -> list[str]:
        return marks.read_text().split() if marks.exists() else []

    wait_until(lambda: "step-up" in lines(), 20, "the worker step to start")
    cancel(job, signal="USR1", batch_only=True)
    wait_until(lambda: "batch" in lines(), 10, "the batch step's trap")
    cancel(job, signal="USR1")
    wait_until(lambda: "step" in lines(), 10, "the worker step's trap")
    assert lines().count("batch") == 1 and lines().count("step") == 1
    assert info(job).state is SlurmJobState.RUNNING
    cancel(job)
    ended = in_state(job, SlurmJobState.CANCELLED)
    assert ended.run_state()[0] is RunState.CANCELLED


def test_requeue_running_job_and_refusal_of_a_pending_one(
        slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    job = submit(SlurmOptions(), batch(tmp_path, "sleep 300"))
    try:
        in_state(job, SlurmJobState.RUNNING)
        requeue(job)
        again = wait_until(lambda: (i := info(job)).restarts == 1 and i, 10, "Restarts=1")
        assert again.run_state()[0] in (RunState.QUEUED, RunState.RUNNING)
        if again.state is SlurmJobState.PENDING:
            with pytest.raises(RequeueRefused, match=f"^Slurm would not requeue job {job}: "
                                                     "Job is pending execution"):
                requeue(job)
    finally:
        cancel(job)


def test_array_tasks_name_themselves_by_array_id(slurm_cluster: SlurmCluster,
                                                 tmp_path: Path) -> None:
    out = tmp_path / "ids"
    job = submit(SlurmOptions(), batch(
        tmp_path, f"echo ${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}} >> {out}",
        array="0-2%2"))
    assert job.task is None
    wait_until(lambda: out.exists() and len(out.read_text().split()) == 3, 30, "3 tasks")
    assert sorted(out.read_text().split()) == [f"{job}_{t}" for t in range(3)]
    tasks = show_job(job)
    assert {str(t.job_id) for t in tasks} == {f"{job}_{t}" for t in range(3)}


def test_a_lost_node_takes_only_its_own_step(slurm_cluster: SlurmCluster,
                                             tmp_path: Path) -> None:
    """Allocation mode's node loss: with ``--no-kill`` (BatchJob's default) the job goes on
    on the node left, and the lost node's srun ends (``Node failure``): how the executor
    will learn that a worker is gone and retry its episode elsewhere."""
    marks = tmp_path / "marks"
    step = f"echo up-$SLURMD_NODENAME >> {marks}; sleep 300"
    run_step = (f"(srun --exact -N1 -n1 -c3 bash -c {shlex.quote(step)}; "
                f"echo srun-exit-$? >> {marks}) &")
    job = submit(SlurmOptions(cpus_per_worker=3),
                 batch(tmp_path, f"{run_step} {run_step} wait", tasks=2))

    def lines() -> list[str]:
        return marks.read_text().split() if marks.exists() else []

    try:
        wait_until(lambda: {"up-n1", "up-n2"} <= set(lines()), 20, "a step on each node")
        lost = time.monotonic()
        slurm_cluster.lose_node("n2")
        wait_until(lambda: any(m.startswith("srun-exit-") for m in lines()),
                 SLURMD_TIMEOUT_S + 25, "the lost node's srun to end")
        print(f"node lost -> its srun ends: {time.monotonic() - lost:.1f} s")
        # (Slurm 22.05's srun exits 0 here: its status does not say the worker was lost;
        # that it ended before being told to is what does)
        assert "srun: error: Node failure on n2" in (tmp_path / f"job-{job}.out").read_text()
        left = info(job)
        assert (left.state, left.nodes) == (SlurmJobState.RUNNING, "n1")
        # while n2 is down, a job needing both nodes is not bad input: it queues
        later = batch(tmp_path, "true", tasks=2)
        with pytest.raises(SlurmRefused):  # --test-only: cannot start now
            check_submittable(SlurmOptions(cpus_per_worker=3), later)
        waiting = submit(SlurmOptions(cpus_per_worker=3), later)
        try:
            pending = wait_until(lambda: (i := info(waiting)).reason and i, 10, "a reason")
            assert pending.state is SlurmJobState.PENDING
            reason = pending.run_state()[1]
            assert "UnavailableNodes:n2" in reason or "DOWN" in reason, reason
        finally:
            cancel(waiting)
    finally:
        cancel(job)
        if "n2" not in slurm_cluster.procs:
            slurm_cluster.start_node("n2")
        slurm_cluster.wait_nodes("idle", timeout=30)


def test_forgotten_job_is_no_record(slurm_cluster: SlurmCluster) -> None:
    assert show_job("999999") == [] and queue("999999") == []
    cancel("999999")  # nothing to cancel: not an error
