"""The test cluster is a real Slurm: jobs land on both nodes, batch output appears, gres
sets CUDA_VISIBLE_DEVICES, requeue restarts a job, scancel leaves nothing, a lost slurmd
takes its node down. What the Slurm executor will rely on (issue 23)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from slurmcluster import REQUEUE_DELAY_S, SLURMD_TIMEOUT_S, SlurmCluster, two_node_cluster
from waiting import wait_until

pytestmark = pytest.mark.slurm


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def job_field(cluster: SlurmCluster, job: str, key: str) -> str:
    line = cluster.run("scontrol", "show", "job", "--oneliner", job).stdout
    return next(w.split("=", 1)[1] for w in line.split() if w.startswith(key + "="))


def sbatch(cluster: SlurmCluster, *args: str) -> str:
    return cluster.run("sbatch", "--parsable", *args).stdout.strip()


def test_srun_lands_on_both_nodes(slurm_cluster: SlurmCluster) -> None:
    done = slurm_cluster.run("srun", "-N2", "--ntasks-per-node=1", "printenv",
                             "SLURMD_NODENAME")
    assert sorted(done.stdout.split()) == ["n1", "n2"]


def test_srun_hands_its_stdin_to_the_task(slurm_cluster: SlurmCluster) -> None:
    """How a worker step can get the run's channel secret: not argv, not environment."""
    done = subprocess.run(["srun", "-n1", "--exact", "bash", "-c", "read s; echo got-$s"],
                          input="s3cret\n", capture_output=True, text=True, timeout=30,
                          env=slurm_cluster.env())
    assert done.stdout == "got-s3cret\n", done.stderr


def test_sbatch_wrap_writes_its_output_file(slurm_cluster: SlurmCluster, tmp_path: Path
                                            ) -> None:
    out = tmp_path / "job.out"
    job = sbatch(slurm_cluster, f"--output={out}", "--wrap", "echo ran as $SLURM_JOB_ID")
    wait_until(lambda: job_field(slurm_cluster, job, "JobState") == "COMPLETED", 20,
             f"job {job} COMPLETED")
    assert out.read_text() == f"ran as {job}\n"


@pytest.mark.parametrize(("gres", "visible"), [("gpu:1", "0"), ("gpu:2", "0,1")])
def test_gres_gpu_sets_cuda_visible_devices(slurm_cluster: SlurmCluster, gres: str,
                                            visible: str) -> None:
    done = slurm_cluster.run("srun", f"--gres={gres}", "printenv", "CUDA_VISIBLE_DEVICES")
    assert done.stdout.strip() == visible


def test_no_gres_asked_no_cuda_visible_devices(slurm_cluster: SlurmCluster) -> None:
    done = slurm_cluster.run("srun", "bash", "-c", "echo ${CUDA_VISIBLE_DEVICES-unset}")
    assert done.stdout.strip() == "unset"


def test_exact_steps_of_one_allocation_run_at_once_on_both_nodes(
        slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """The allocation mode's shape: one batch job, its workers ``srun --exact`` steps;
    two 3-CPU tasks cannot share a 4-CPU node, so the steps land one on each node, and
    each waits for the other to have started (both must run at the same time)."""
    seen = tmp_path / "seen"
    step = (f"echo $SLURMD_NODENAME >> {seen}; for i in $(seq 200); do "
            f"[ $(wc -l < {seen}) -ge 2 ] && exit 0; sleep 0.05; done; exit 1")
    out = tmp_path / "job.out"
    submitted = time.monotonic()
    job = sbatch(slurm_cluster, "--ntasks=2", "--cpus-per-task=3", f"--output={out}",
                 "--wrap", f"srun --exact -N1 -n1 -c3 bash -c '{step}' & a=$!; "
                           f"srun --exact -N1 -n1 -c3 bash -c '{step}' & b=$!; "
                           "wait $a && wait $b && echo both-ok")
    wait_until(lambda: seen.exists(), 20, "the first step")
    first = time.monotonic() - submitted
    state = wait_until(lambda: (s := job_field(slurm_cluster, job, "JobState")) in
                     ("COMPLETED", "FAILED") and s, 30, f"job {job} to end")
    assert state == "COMPLETED", out.read_text()
    assert sorted(seen.read_text().split()) == ["n1", "n2"]
    assert out.read_text().strip().endswith("both-ok")
    print(f"sbatch -> first srun step running: {first:.2f} s")


def test_steps_of_a_gpu_job_get_their_own_gpus_or_none(slurm_cluster: SlurmCluster,
                                                       tmp_path: Path) -> None:
    """Inside a job holding both GPUs of a node, two concurrent ``--gres=gpu:1`` steps
    (shared nodesets' hosts) get one GPU each; a step without ``--gres`` sees all the
    job's GPUs, so a CPU-only worker step must ask ``--gres=none``."""
    out = tmp_path / "job.out"
    step = "echo $SLURM_STEP_ID:${CUDA_VISIBLE_DEVICES-unset}; sleep 1"
    job = sbatch(slurm_cluster, "-N1", "-n2", "--gres=gpu:2", f"--output={out}", "--wrap",
                 f"srun --exact -n1 --gres=gpu:1 bash -c '{step}' & "
                 f"srun --exact -n1 --gres=gpu:1 bash -c '{step}' & wait; "
                 f"srun --exact -n1 bash -c '{step}'; "
                 f"srun --exact -n1 --gres=none bash -c '{step}'")
    state = wait_until(lambda: (s := job_field(slurm_cluster, job, "JobState")) in
                     ("COMPLETED", "FAILED") and s, 30, f"job {job} to end")
    assert state == "COMPLETED", out.read_text()
    seen = dict(line.split(":") for line in out.read_text().split())
    assert sorted([seen["0"], seen["1"]]) == ["0", "1"]
    assert (seen["2"], seen["3"]) == ("0,1", "unset")


def test_requeue_restarts_a_running_job_with_restart_count_1(
        slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    out = tmp_path / "job.out"
    job = sbatch(slurm_cluster, f"--output={out}", "--open-mode=append", "--wrap",
                 "echo start ${SLURM_RESTART_COUNT-unset} $$; sleep 300")
    try:
        first = wait_until(lambda: out.exists() and out.read_text().split(), 20, "first start")
        assert first[:2] == ["start", "unset"]
        asked = time.monotonic()
        slurm_cluster.run("scontrol", "requeue", job)
        lines = wait_until(lambda: [ln.split() for ln in out.read_text().splitlines()
                                  if ln.startswith("start ")][1:], REQUEUE_DELAY_S + 20,
                         "the second start")
        took = time.monotonic() - asked
        assert lines[0][:2] == ["start", "1"]
        assert not alive(int(first[2])), "the first run's script outlived the requeue"
        assert job_field(slurm_cluster, job, "Restarts") == "1"
        print(f"requeue -> running again: {took:.1f} s (cred_expire={REQUEUE_DELAY_S})")
    finally:
        slurm_cluster.run("scancel", job, check=False)


def test_scancel_ends_the_job_and_leaves_no_process(slurm_cluster: SlurmCluster,
                                                    tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    job = sbatch(slurm_cluster, "--output=/dev/null", "--wrap",
                 f"sleep 300 & echo $$ $! > {pids}; wait")
    found = wait_until(lambda: pids.exists() and pids.read_text().split(), 20, "the job's PIDs")
    script, child = (int(p) for p in found)
    assert alive(script) and alive(child)
    slurm_cluster.run("scancel", job)
    wait_until(lambda: not alive(script) and not alive(child), 15, "the job's processes to end")
    wait_until(lambda: job_field(slurm_cluster, job, "JobState") == "CANCELLED", 15,
             f"job {job} CANCELLED")


def test_killed_slurmd_takes_its_node_down(slurm_cluster: SlurmCluster) -> None:
    killed = time.monotonic()
    slurm_cluster.kill_node("n2")
    try:
        took = slurm_cluster.wait_nodes("down*", ("n2",), timeout=SLURMD_TIMEOUT_S + 25)
        assert took >= SLURMD_TIMEOUT_S - 1, "down before SlurmdTimeout: not the timeout"
        assert not slurm_cluster.node_states()["n1"].endswith("*"), "n1 lost too"
        print(f"slurmd killed -> node down: {time.monotonic() - killed:.1f} s "
              f"(SlurmdTimeout={SLURMD_TIMEOUT_S})")
    finally:
        slurm_cluster.start_node("n2")
    back = slurm_cluster.wait_nodes("idle", timeout=30)
    print(f"slurmd restarted -> node idle again: {back:.1f} s (ReturnToService=2)")


def test_a_failing_test_still_leaves_no_daemon_and_no_job(slurm_cluster: SlurmCluster,
                                                          tmp_path: Path) -> None:
    """A second cluster, a job running on it, then the block fails: every daemon and
    every process of the job end (by PID), and the temp dir goes."""
    with pytest.raises(RuntimeError, match="the test failed"):
        with two_node_cluster() as other:
            pid = tmp_path / "pid"
            sbatch(other, "--output=/dev/null", "--wrap", f"echo $$ > {pid}; exec sleep 300")
            job_pid = int(wait_until(lambda: pid.exists() and pid.read_text().strip(), 20,
                                   "the job to start"))
            ours = other.leftovers()  # daemons, slurmstepd, the job's process
            assert job_pid in ours and len(ours) >= 6
            daemons = {p.pid for p in other.procs.values()}
            assert daemons < set(ours)
            raise RuntimeError("the test failed")
    wait_until(lambda: not any(alive(pid) for pid in ours), 10, "every process to end")
    assert not other.root.exists()
