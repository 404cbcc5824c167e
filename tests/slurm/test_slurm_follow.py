"""Following a Slurm run from the login node through its run dir (evaltui/slurm/follow.py):
``evaltui ls`` / ``show`` of a backend (the TUI's run table reads the same run index) show a
held job queued with Slurm's reason, then running and done; ``evaltui cancel RUN``
scancels the job; a job Slurm no longer lists reads aborted; all from one squeue read per
refresh, on the real test cluster."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

from apihelpers import Backend, isolate_env, start_backend  # noqa: E402
from pool_helpers import walk_graph, write_dataset  # noqa: E402
from runhelpers import ENGINE_TESTS  # noqa: E402
from slurmcluster import SlurmCluster  # noqa: E402
from waiting import wait_until  # noqa: E402

from evaltui.cli import main  # noqa: E402
from evaltui.contract.states import RunState  # noqa: E402
from evaltui.engine.graph.specchecks import validate_in_workspace  # noqa: E402
from evaltui.rundir.layout import runs_root  # noqa: E402
from evaltui.rundir.status import read_run_status  # noqa: E402
from evaltui.rundir.store import update_scheduler_record  # noqa: E402
from evaltui.slurm import follow  # noqa: E402
from evaltui.slurm.follow import SlurmQueue, follow_status  # noqa: E402
from evaltui.slurm.runsubmit import SubmittedSlurmRun  # noqa: E402
from evaltui.slurm.runsubmit import submit_run as submit_checked  # noqa: E402


def submit_run(spec: dict, outputs: Path) -> SubmittedSlurmRun:
    """A spec checked as every submit path checks it, then submitted to Slurm."""
    return submit_checked(validate_in_workspace(spec), outputs)


pytestmark = pytest.mark.slurm


@pytest.fixture
def queue(monkeypatch: pytest.MonkeyPatch) -> SlurmQueue:
    """This test's shared squeue read (a fresh one: no answer from another test's)."""
    fresh = SlurmQueue(every=0.2)
    monkeypatch.setattr(follow, "_shared", fresh)
    return fresh


@pytest.fixture
def backend(slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            queue: SlurmQueue) -> Iterator[Backend]:
    env = isolate_env(tmp_path, monkeypatch)
    monkeypatch.setenv("EVALTUI_SLURM_LISTEN_HOST", "127.0.0.1")
    served = start_backend()
    served.outputs = env["outputs"]  # type: ignore[attr-defined]
    try:
        yield served
    finally:
        served.stop()
        for job in slurm_cluster.run("squeue", "--noheader", "--format=%i").stdout.split():
            slurm_cluster.run("scancel", job, check=False)


@pytest.fixture
def cli(backend: Backend, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    monkeypatch.setenv("BACKEND_URL", backend.url)
    monkeypatch.setenv("COLUMNS", "200")

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err
    return run


def walk_spec(tmp_path: Path, lengths: list[int], *, hold: bool = True,
              **env: Any) -> dict[str, Any]:
    return {"graph": walk_graph(dict(env)), "active_workspace_dir": str(ENGINE_TESTS),
            "eval": {"dataset": str(write_dataset(tmp_path / "walk.jsonl", lengths)),
                     "worker_count": 2, "executor": "slurm",
                     "slurm": {"extra_args": ["--hold"] if hold else []}}}


def listed(cli: Callable[..., tuple[int, str, str]], run_id: str) -> dict[str, Any]:
    code, out, err = cli("ls", "--json")
    assert code == 0, err
    return next(r for r in json.loads(out) if r["run_id"] == run_id)


def test_a_held_job_lists_queued_with_slurms_reason_then_running_then_done(
        slurm_cluster: SlurmCluster, backend: Backend, tmp_path: Path, queue: SlurmQueue,
        cli: Callable[..., tuple[int, str, str]]) -> None:
    run = submit_run(walk_spec(tmp_path, [30, 30], step_sleep_ms=60), backend.outputs)  # type: ignore[attr-defined]
    record = json.loads((run.run_dir / "scheduler.json").read_text())
    assert record["slurm_job_id"] == run.job_id and record["slurm_cluster"]
    row = listed(cli, run.run_dir.name)
    assert row["state"] == "queued"
    assert row["waiting_reason"] == f"Slurm job {run.job_id}: PENDING (JobHeldUser)"
    code, out, _ = cli("ls")
    assert code == 0 and "JobHeldUser" in out
    slurm_cluster.run("scontrol", "release", run.job_id)
    wait_until(lambda: listed(cli, run.run_dir.name)["state"] == "running", timeout=60,
               what="the run listed running")
    wait_until(lambda: listed(cli, run.run_dir.name)["state"] == "done", timeout=90,
               what="the run listed done")
    code, out, _ = cli("show", str(run.run_dir))
    assert code == 0 and "done" in out
    record = json.loads((run.run_dir / "scheduler.json").read_text())  # the job's own word
    assert record["slurm_batch_host"] in ("n1", "n2")
    assert record["slurm_cluster"] == slurm_cluster.run(
        "scontrol", "show", "config").stdout.split("ClusterName", 1)[1].split()[1]


def test_cancel_of_a_slurm_run_scancels_its_job(
        slurm_cluster: SlurmCluster, backend: Backend, tmp_path: Path,
        cli: Callable[..., tuple[int, str, str]]) -> None:
    run = submit_run(walk_spec(tmp_path, [3]), backend.outputs)  # type: ignore[attr-defined]
    assert listed(cli, run.run_dir.name)["state"] == "queued"
    code, _, err = cli("cancel", run.run_dir.name)
    assert code == 0, err
    info = slurm_cluster.run("scontrol", "show", "job", run.job_id).stdout
    assert "JobState=CANCELLED" in info
    wait_until(lambda: listed(cli, run.run_dir.name)["state"] == "cancelled", timeout=20,
               what="the run listed cancelled")
    # a job cancelled outside evaltui, with no follower: Slurm's word, in the note
    other = submit_run(walk_spec(tmp_path, [3]), backend.outputs)  # type: ignore[attr-defined]
    slurm_cluster.run("scancel", other.job_id)
    row = wait_until(lambda: (r := listed(cli, other.run_dir.name))["state"] == "cancelled"
                     and r, timeout=20, what="the other run listed cancelled")
    assert f"Slurm job {other.job_id}: CANCELLED" in (row["error"] or "")


def test_a_job_slurm_no_longer_lists_reads_aborted_from_one_squeue_read(
        slurm_cluster: SlurmCluster, backend: Backend, tmp_path: Path,
        queue: SlurmQueue) -> None:
    runs = [submit_run(walk_spec(tmp_path, [3]), backend.outputs)  # type: ignore[attr-defined]
            for _ in range(3)]
    gone = runs[0].run_dir
    update_scheduler_record(gone, slurm_job_id="999999")  # a job Slurm never had
    queue.every = 60.0
    queue.lookup("warm-up")  # one read, taken after every record was written
    calls = queue.calls
    states = [follow_status(r.run_dir, read_run_status(r.run_dir)) for r in runs]
    assert queue.calls == calls  # three Slurm runs, no more squeue
    assert states[0].state is RunState.ABORTED and "no longer in Slurm's queue" in \
        (states[0].note or "")
    assert [s.state for s in states[1:]] == [RunState.QUEUED] * 2
    listing = backend.scheduler.list_runs()  # type: ignore[attr-defined]
    assert queue.calls == calls and len(listing) == 3


def test_resume_of_a_slurm_run_slurm_ended_submits_it_again_into_the_same_run_dir(
        slurm_cluster: SlurmCluster, backend: Backend, tmp_path: Path,
        cli: Callable[..., tuple[int, str, str]]) -> None:
    spec = walk_spec(tmp_path, [20, 20, 20], hold=False, step_sleep_ms=50)
    run = submit_run(spec, backend.outputs)  # type: ignore[attr-defined]
    slurm_cluster.run("scancel", run.job_id)  # ended early, by someone else
    wait_until(lambda: listed(cli, run.run_dir.name)["state"] == "cancelled", timeout=30,
               what="the run listed cancelled")
    code, _, err = cli("resume", run.run_dir.name)
    assert code == 0, err
    record = json.loads((run.run_dir / "scheduler.json").read_text())
    assert record["slurm_job_id"] != run.job_id and record["resume_count"] == 1
    wait_until(lambda: listed(cli, run.run_dir.name)["state"] == "done", timeout=90,
               what="the resumed run listed done")
    rows = json.loads((run.run_dir / "summary.json").read_text())["episodes"]
    assert sorted(r["episode_index"] for r in rows if r["status"] == "ok") == [0, 1, 2]


def test_submit_with_the_slurm_executor_has_the_backend_sbatch_the_job(
        slurm_cluster: SlurmCluster, backend: Backend, tmp_path: Path,
        cli: Callable[..., tuple[int, str, str]]) -> None:
    """``evaltui submit --executor slurm`` to a backend: the backend's machine submits the
    job (its run dir under the backend's outputs), ``ls`` lists it queued with Slurm's
    reason while held, then done."""
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(walk_spec(tmp_path, [3, 3])))
    code, out, err = cli("submit", str(job_file), "--executor", "slurm",
                         "--slurm-time", "5", "--json")
    assert code == 0, err
    ref = json.loads(out)
    assert ref["state"] == "queued"
    run_dir = runs_root(backend.outputs) / ref["run_id"]  # type: ignore[attr-defined]
    job = json.loads((run_dir / "scheduler.json").read_text())["slurm_job_id"]
    assert "TimeLimit=00:05:00" in slurm_cluster.run("scontrol", "show", "job", job).stdout
    row = listed(cli, ref["run_id"])
    assert (row["state"], row["waiting_reason"]) == (
        "queued", f"Slurm job {job}: PENDING (JobHeldUser)")
    slurm_cluster.run("scontrol", "release", job)
    wait_until(lambda: listed(cli, ref["run_id"])["state"] == "done", timeout=90,
               what="the run listed done")
