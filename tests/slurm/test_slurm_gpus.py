"""GPUs inside a Slurm allocation, on the test cluster (fake GPUs through gres ``File=``):
a run submitted with ``eval.slurm.gres: gpu:2`` hosts its shared policy on the allocated
GPU with the most free memory, the fake index following Slurm's ``CUDA_VISIBLE_DEVICES``
(not the submitting shell's)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

from pool_helpers import walk_graph, write_dataset  # noqa: E402
from runhelpers import ENGINE_TESTS  # noqa: E402
from slurmcluster import SlurmCluster  # noqa: E402
from waiting import wait_until  # noqa: E402

from evaltui.contract.states import RunState  # noqa: E402
from evaltui.engine.graph.specchecks import validate_in_workspace  # noqa: E402
from evaltui.gpu import fakegpu  # noqa: E402
from evaltui.rundir.status import read_run_status  # noqa: E402
from evaltui.slurm.runsubmit import SubmittedSlurmRun  # noqa: E402
from evaltui.slurm.runsubmit import submit_run as submit_checked  # noqa: E402


def submit_run(spec: dict, outputs: Path) -> SubmittedSlurmRun:
    """A spec checked as every submit path checks it, then submitted to Slurm."""
    return submit_checked(validate_in_workspace(spec), outputs)


pytestmark = pytest.mark.slurm


@pytest.mark.parametrize("busy", [0, 1])
def test_the_shared_host_lands_on_the_allocated_gpu_with_the_most_free_memory(
        busy: int, slurm_cluster: SlurmCluster, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_STATE_DIR", str(tmp_path / "state"))  # the job's too
    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "2x1000")
    monkeypatch.setenv("EVALTUI_FAKE_GPU_INDEX", "7")  # the login shell's: must not follow
    monkeypatch.setenv("EVALTUI_SLURM_LISTEN_HOST", "127.0.0.1")
    trace = tmp_path / "host.json"
    graph = walk_graph()
    graph["nodesets"]["policy"] = {"impl": "gpu_pinned_nodesets:PinnedPolicy",
                                   "parallelism": "shared",
                                   "params": {"trace": str(trace), "charge_mb": 200}}
    spec = {"graph": graph, "active_workspace_dir": str(ENGINE_TESTS),
            "eval": {"dataset": str(write_dataset(tmp_path / "walk.jsonl", [3, 2])),
                     "executor": "slurm", "slurm": {"gres": "gpu:2"}}}
    fakegpu.charge(400, gpu=busy)  # the other allocated GPU has more free
    try:
        run = submit_run(spec, tmp_path / "out")
        wait_until(lambda: (run.run_dir / "_DONE").exists(), timeout=90, what="the run")
    finally:
        fakegpu.release(gpu=busy)
    status = read_run_status(run.run_dir)
    assert status.state is RunState.DONE, (run.run_dir / "run.log").read_text()[-2000:]
    free = str(1 - busy)
    assert json.loads(trace.read_text()) == {"CUDA_VISIBLE_DEVICES": free,
                                             "EVALTUI_FAKE_GPU_INDEX": free}
    info = slurm_cluster.run("scontrol", "show", "job", run.job_id).stdout
    assert "gres:gpu:2" in info or "gpu:2" in info
