"""``evaltui gpus`` on a real GPU: NVML's compute processes, named by their run.

Runs with ``-m gpu`` where NVML sees a GPU (skipped elsewhere, see conftest.py).
"""

from __future__ import annotations

import json

import psutil
import pytest
from gpuhelpers import GpuUnderTest, Holder

from evaltui.cli import main
from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.rundir.layout import runs_root

pytestmark = pytest.mark.gpu


def test_a_process_holding_gpu_memory_is_listed_with_its_run(gpu: GpuUnderTest, isolated_dirs,
                                                              capsys) -> None:
    with Holder() as holder:
        assert holder.command(f"alloc {gpu.alloc_mb}")["held_mb"] == gpu.alloc_mb
        run_dir = runs_root(isolated_dirs["outputs"]) / "20260115_094000"
        run_dir.mkdir(parents=True)
        write_json_atomic(run_dir / "scheduler.json", {
            "state": "running", "pid": holder.pid,
            "pid_create_time": psutil.Process(holder.pid).create_time()})
        assert main(["gpus", "--format", "json"]) == 0
        gpus = {g["gpu"]: g for g in json.loads(capsys.readouterr().out)}
        processes = gpus[gpu.index]["processes"]
        assert processes is not None, "NVML does not attribute memory to processes here"
        mine = next(p for p in processes if p["pid"] == holder.pid)
        assert mine["used_mb"] >= gpu.alloc_mb and mine["run_id"] == run_dir.name
        assert mine["user"]
        assert main(["gpus"]) == 0
        text = capsys.readouterr().out
        assert f"run {run_dir.name}" in text and all(len(line) <= 80
                                                     for line in text.splitlines())
