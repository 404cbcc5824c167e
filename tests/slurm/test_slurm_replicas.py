"""Replicas under the Slurm executor, on the test cluster (fake GPUs through gres): the
run's batch step hosts one replica per allocated GPU and watches them as the local pool
does -- a replica killed mid-run is lost (summary.json, one line in run.log) and the
workers, job steps on either node, finish every episode on the other one."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

from runhelpers import builtin_graph, episode_rows, finished_count  # noqa: E402
from slurmcluster import SlurmCluster  # noqa: E402
from waiting import wait_until  # noqa: E402

from evaltui.contract.states import RunState  # noqa: E402
from evaltui.engine.graph.specchecks import validate_in_workspace  # noqa: E402
from evaltui.rundir.jsonfiles import read_json  # noqa: E402
from evaltui.rundir.status import read_run_status  # noqa: E402
from evaltui.slurm.runsubmit import SubmittedSlurmRun  # noqa: E402
from evaltui.slurm.runsubmit import submit_run as submit_checked  # noqa: E402


def submit_run(spec: dict, outputs: Path) -> SubmittedSlurmRun:
    """A spec checked as every submit path checks it, then submitted to Slurm."""
    return submit_checked(validate_in_workspace(spec), outputs)


pytestmark = pytest.mark.slurm
EPISODES = 16


def test_a_replica_killed_mid_run_is_lost_and_the_slurm_run_completes(
        slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_STATE_DIR", str(tmp_path / "state"))  # the job's too
    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "2x24576")
    monkeypatch.delenv("EVALTUI_FAKE_GPU_INDEX", raising=False)
    monkeypatch.setenv("EVALTUI_SLURM_LISTEN_HOST", "127.0.0.1")
    graph = builtin_graph("model", env__frame_stride=0, policy__forward_latency_ms=20)
    graph["nodesets"]["policy"]["replicas"] = "per_gpu"
    spec = {"graph": graph, "eval": {"dataset": "babyai", "split": "GoToLocal",
                                     "episode_count": EPISODES, "worker_count": 2,
                                     "max_episode_retries": 2, "executor": "slurm",
                                     "slurm": {"gres": "gpu:2"}}}
    run = submit_run(spec, tmp_path / "out")
    run_dir = run.run_dir

    def replicas() -> list[dict[str, Any]] | None:
        try:
            notes = read_json(run_dir / "summary.json")["replicas"]["policy"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if (run_dir / "_DONE").exists():
            raise AssertionError("the run ended before both replicas served: "
                                 f"{notes}\n{(run_dir / 'run.log').read_text()[-2000:]}")
        return notes if len(notes) == 2 and all(n["requests"] for n in notes) else None

    try:
        notes = wait_until(replicas, timeout=90, what="both replicas serving")
        assert [n["gpu"] for n in notes] == ["GPU0", "GPU1"]
        assert finished_count(run_dir) < EPISODES
        victim = notes[1]
        os.kill(victim["pid"], signal.SIGKILL)  # the batch step runs on this machine
        wait_until(lambda: (run_dir / "_DONE").exists(), timeout=120, what="the run's end")
    finally:
        slurm_cluster.run("scancel", run.job_id, check=False)
    log = (run_dir / "run.log").read_text()
    assert read_run_status(run_dir).state is RunState.DONE, log[-2000:]
    rows = episode_rows(run_dir)
    assert sorted(r["episode_index"] for r in rows) == list(range(EPISODES))
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    assert {r["node"] for r in rows} <= {"n1", "n2"}
    summary = read_json(run_dir / "summary.json")
    states = {n["gpu"]: n["state"] for n in summary["replicas"]["policy"]}
    assert states == {"GPU0": "up", "GPU1": "lost"}
    lost = [n for n in summary["replicas"]["policy"] if n["state"] == "lost"][0]
    assert lost["pid"] == victim["pid"]  # not restarted
    assert log.count("going on degraded with 1 of 2 replicas") == 1
