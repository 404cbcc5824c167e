"""The gpu tests' graph, run where there is no GPU: at 0 MiB it runs in every placement (so
the graph reaching a GPU machine is known to work), and a run that needs device memory
fails saying why instead of running without it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from gpuhelpers import holding_spec, libcuda_loads, summary

from evaltui.contract.states import RunState
from evaltui.gpu.cudadriver import LIBCUDA
from evaltui.scheduler.scheduler import JobScheduler

MakeScheduler = Callable[..., JobScheduler]


@pytest.mark.parametrize(("placement", "workers"),
                         [("inline", 1), ("replicated", 2), ("shared", 1)])
def test_the_graph_runs_in_every_placement_at_0_mib(
        placement: str, workers: int, make_scheduler: MakeScheduler, dataset: Path) -> None:
    sched = make_scheduler().start()
    run_id, _ = sched.submit(holding_spec(dataset, placement=placement, vram_mb=0,
                                          marginal_vram_mb=100, episodes=3, sleep_sec=0.0,
                                          workers=workers))
    assert sched.wait(run_id, timeout=60) is RunState.DONE
    assert summary(sched.outputs, run_id)["counts_by_status"] == {"ok": 3}


def test_a_run_not_placed_on_a_gpu_does_not_allocate_anywhere(
        make_scheduler: MakeScheduler, dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sched = make_scheduler().start()
    run_id, _ = sched.submit(holding_spec(dataset, placement="inline", vram_mb=64,
                                          marginal_vram_mb=100, episodes=2))
    assert sched.wait(run_id, timeout=60) is RunState.FAILED
    assert "CUDA_VISIBLE_DEVICES is not set: this nodeset allocates only on a GPU the " \
           "scheduler assigned" in summary(sched.outputs, run_id)["error"]


@pytest.mark.skipif(libcuda_loads(), reason=f"{LIBCUDA} loads here: the gpu tests use it")
def test_a_run_on_a_machine_without_the_driver_fails_naming_it(
        make_scheduler: MakeScheduler, dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # inherited by the run: it tries device 0
    sched = make_scheduler().start()
    run_id, _ = sched.submit(holding_spec(dataset, placement="inline", vram_mb=64,
                                          marginal_vram_mb=100, episodes=2))
    assert sched.wait(run_id, timeout=60) is RunState.FAILED
    error = summary(sched.outputs, run_id)["error"]
    assert f"CudaUnavailable: cannot load the CUDA driver library {LIBCUDA}" in error
