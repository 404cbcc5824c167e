"""GPUs inside a Slurm allocation (evaltui/engine/run/allocgpus.py), where no cluster is:
the fake index follows the GPUs Slurm gave, and a host goes to the freest GPU as measured
from the fake devices' live charges."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaltui.engine.run.allocgpus import adopt_slurm_gpus, host_gpu_env
from evaltui.gpu import fakegpu


def test_the_fake_index_follows_the_gpus_slurm_gave() -> None:
    leaked = {"EVALTUI_FAKE_GPUS": "2x1000", "EVALTUI_FAKE_GPU_INDEX": "7"}  # sbatch's shell
    env = {**leaked, "SLURM_JOB_ID": "5", "SLURM_JOB_GPUS": "0,1",
           "CUDA_VISIBLE_DEVICES": "0,1"}
    assert adopt_slurm_gpus(env) == ["0", "1"] and env["EVALTUI_FAKE_GPU_INDEX"] == "0,1"
    env = {**leaked, "SLURM_JOB_ID": "5"}  # no gres: Slurm set no CUDA_VISIBLE_DEVICES
    assert adopt_slurm_gpus(env) == [] and "EVALTUI_FAKE_GPU_INDEX" not in env
    env = {**leaked, "SLURM_JOB_ID": "5", "CUDA_VISIBLE_DEVICES": "3"}  # not Slurm's
    assert adopt_slurm_gpus(env) == [] and "EVALTUI_FAKE_GPU_INDEX" not in env
    env = dict(leaked)  # not in a job: left alone
    assert adopt_slurm_gpus(env) == [] and env == leaked


def test_a_host_goes_to_the_allocated_gpu_with_the_most_measured_free_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "3x1000")
    try:
        assert host_gpu_env(["1", "2"]) == {"CUDA_VISIBLE_DEVICES": "1",
                                            "EVALTUI_FAKE_GPU_INDEX": "1"}  # a tie: first
        fakegpu.charge(300, gpu=1)
        assert host_gpu_env(["1", "2"])["CUDA_VISIBLE_DEVICES"] == "2"
        fakegpu.charge(600, gpu=2)
        assert host_gpu_env(["1", "2"])["CUDA_VISIBLE_DEVICES"] == "1"
        # GPU 0 is the freest (nothing charged) but not allocated: never chosen
        assert host_gpu_env(["1", "2"])["CUDA_VISIBLE_DEVICES"] == "1"
        assert host_gpu_env([]) == {}
    finally:
        for gpu in range(3):
            fakegpu.release(gpu=gpu)

