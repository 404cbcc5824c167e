"""The gpu tests' fixtures, and their skip: ``python -m pytest -m gpu`` runs them where NVML
sees a GPU; elsewhere they skip with one line saying why.

Whether there is a GPU is read once, through the scheduler's own NVML probe. Tests here
without the ``gpu`` marker (the allocator's error path) run everywhere.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # gpu_nodesets must import for spec validation

from gpuhelpers import (  # noqa: E402
    GpuUnderTest,
    Holder,
    read_gpu,
    used_by,
    wait_until,
    write_dataset,
)
from proctools import scheduler_maker  # noqa: E402

from evaltui.scheduler.admission.resources import NvmlProbe, visible_gpu_indices  # noqa: E402
from evaltui.scheduler.scheduler import JobScheduler  # noqa: E402

SKIPPED_KEY = pytest.StashKey[int]()


@functools.cache
def chosen_gpu() -> tuple[int | None, str]:
    """The GPU to test on (the visible one with the fewest processes, then the most free
    memory), or None and why there is none."""
    probe = NvmlProbe()
    try:
        reading = probe.read()
    finally:
        probe.close()
    if not reading.available:
        return None, f"no GPU for the gpu tests: {reading.reason}"
    visible = visible_gpu_indices()
    gpus = [g for g in reading.gpus if visible is None or g.index in visible]
    if not gpus:
        return None, (f"no GPU for the gpu tests: CUDA_VISIBLE_DEVICES="
                      f"{os.environ.get('CUDA_VISIBLE_DEVICES')} hides every GPU NVML sees")
    best = min(gpus, key=lambda g: (len(g.processes or ()), -g.free_mb))
    return best.index, f"GPU{best.index} ({best.name})"


@pytest.fixture(autouse=True)
def _skip_without_gpu(request: pytest.FixtureRequest) -> None:
    # One place raises the skip, so pytest -rs folds every gpu test into one line.
    if request.node.get_closest_marker("gpu") is None:
        return
    index, why = chosen_gpu()
    if index is None:
        request.config.stash[SKIPPED_KEY] = request.config.stash.get(SKIPPED_KEY, 0) + 1
        pytest.skip(why)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Say why once, also without ``-rs`` (the default report lists no skips)."""
    skipped = config.stash.get(SKIPPED_KEY, 0)
    if skipped and "s" not in terminalreporter.reportchars:
        terminalreporter.write_line(f"{skipped} gpu tests skipped: {chosen_gpu()[1]}")


@functools.cache
def _measure_context(index: int) -> int:
    """MiB a CUDA context alone takes on GPU ``index`` (a holder that allocates nothing)."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(index), CUDA_DEVICE_ORDER="PCI_BUS_ID")
    with Holder(env) as holder:
        gpu = read_gpu(index)
        assert gpu.processes is not None, (
            "NVML does not attribute memory to processes on this machine (WDDM, or a "
            "driver/container that hides it): the scheduler cannot either")
        mine = [p.used_mb for p in gpu.processes if p.pid == holder.pid]
        assert mine, (f"NVML lists PIDs {[p.pid for p in gpu.processes]} on GPU{index} but "
                      f"not the holder's {holder.pid}: in a container NVML reports host PIDs "
                      "(run the container with --pid=host)")
    # Gone from NVML's list before any test reads the GPU: a leftover would be "foreign".
    wait_until(lambda: not used_by(read_gpu(index), {holder.pid}), 30, "the holder's exit")
    return mine[0]


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> GpuUnderTest:
    """The GPU under test; this process (and so its schedulers) sees only it."""
    index, _ = chosen_gpu()
    assert index is not None  # the autouse fixture skipped otherwise
    context_mb = _measure_context(index)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", str(index))
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.delenv("EVALTUI_FAKE_GPU_INDEX", raising=False)
    reading = read_gpu(index)
    alloc_mb = max(64, min(1024, reading.free_mb // 8))
    return GpuUnderTest(index, reading.name, reading.total_mb, context_mb, alloc_mb)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """24 short episodes (goals 1..3)."""
    return write_dataset(tmp_path / "line.jsonl", [1, 2, 3] * 8)


@pytest.fixture
def make_scheduler(isolated_dirs: dict[str, Path]) -> Iterator[Callable[..., JobScheduler]]:
    """Schedulers on the real NVML probe (fast ticks); stopped, and their runs and nodeset
    hosts killed, at teardown."""
    with scheduler_maker(isolated_dirs["outputs"], cancel_grace_sec=5.0) as make:
        yield make
