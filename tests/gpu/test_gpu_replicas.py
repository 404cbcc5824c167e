"""Two real replicas of a shared nodeset, each holding device memory through the CUDA
driver allocator: NVML attributes each replica host's memory to that replica's GPU.

On a machine with two GPUs or more the replicas go on the two with the most free memory;
on a one-GPU machine both go on it (the run is given ``CUDA_VISIBLE_DEVICES=i,i``): each
host then still holds its own allocation, on the GPU it was given.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from gpuhelpers import GpuUnderTest, holding_spec, read_gpu, used_by, wait_until

from evaltui.procs.spawn import spawn_run
from evaltui.rundir.jsonfiles import read_json
from evaltui.scheduler.admission.resources import NvmlProbe
from tests.runprep import prepare_run


def two_gpus(gpu: GpuUnderTest) -> list[int]:
    probe = NvmlProbe()
    try:
        gpus = probe.read().gpus
    finally:
        probe.close()
    if len(gpus) < 2:
        return [gpu.index, gpu.index]
    best = sorted(gpus, key=lambda g: -g.free_mb)[:2]
    return [g.index for g in best]


@pytest.mark.gpu
def test_each_replica_s_memory_is_on_its_own_gpu(gpu: GpuUnderTest, dataset: Path,
                                                  tmp_path: Path) -> None:
    indices = two_gpus(gpu)
    spec = holding_spec(dataset, placement="shared", vram_mb=gpu.alloc_mb,
                        marginal_vram_mb=gpu.alloc_mb + gpu.context_mb, episodes=24,
                        sleep_sec=0.1, workers=2)
    spec["graph"]["nodesets"]["policy"]["replicas"] = 2
    run_dir, _ = prepare_run(spec, tmp_path / "out")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(map(str, indices)),
           "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    env.pop("EVALTUI_FAKE_GPUS", None)
    env.pop("EVALTUI_FAKE_GPU_INDEX", None)
    proc = spawn_run(run_dir, env)
    try:
        def replicas() -> list[dict[str, Any]] | None:
            try:
                return read_json(run_dir / "summary.json")["replicas"]["policy"]
            except (OSError, ValueError, KeyError, TypeError):
                return None

        notes = wait_until(replicas, 60, "the replicas in summary.json")
        assert [n["gpu"] for n in notes] == [f"GPU{i}" for i in indices]
        for note, index in zip(notes, indices, strict=True):
            held = wait_until(lambda n=note, i=index: (used_by(read_gpu(i), {n["pid"]}) or 0)
                              >= gpu.alloc_mb and used_by(read_gpu(i), {n["pid"]}),
                              60, f"replica {note['pid']}'s memory on GPU{index}")
            assert held >= gpu.alloc_mb
            if indices[0] != indices[1]:  # and none of it on the other GPU
                other = indices[1] if index == indices[0] else indices[0]
                assert not used_by(read_gpu(other), {note["pid"]})
        assert proc.wait(timeout=300) == 0, (run_dir / "run.log").read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "done" and summary["counts_by_status"] == {"ok": 24}
    assert all(n["state"] == "up" and n["requests"] > 0 for n in summary["replicas"]["policy"])
