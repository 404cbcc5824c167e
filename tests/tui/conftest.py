"""TUI test fixtures: run dirs in every state, live stand-in processes, fixed resources.

The scheduler under the embedded backend is never started in these tests (nothing is
admitted or spawned), and its GPU and host probes return fixed readings, so what the
screens show depends only on the fixture files and the injected clock.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from evaltui.contract.pidref import PidRef
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.admission.resources import GpuReading, GpuSnapshot, HostSnapshot
from evaltui.scheduler.scheduler import JobScheduler
from evaltui.tui.app import EvalApp, make_app
from evaltui.tui.embedded import EmbeddedBackend

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from proctools import end_session  # noqa: E402
from runfixtures import NOW, build_runs, relive  # noqa: E402

NO_NVML = "NVML unavailable: NVML Shared Library Not Found"


class StaticGpuProbe:
    """Two fake 24 GiB GPUs with fixed usage (or none, with NVML's reason)."""

    def __init__(self, available: bool = True) -> None:
        self.available = available

    def read(self) -> GpuReading:
        if not self.available:
            return GpuReading(False, NO_NVML, False, ())
        return GpuReading(True, None, True, (
            GpuSnapshot(0, "fake GPU 0", 24576, 9216, 15360, 63.0, ()),
            GpuSnapshot(1, "fake GPU 1", 24576, 22528, 2048, 97.0, ())))

    def close(self) -> None:
        pass


class StaticHostProbe:
    """A 16-core host with 62.5 GiB of RAM, 37.5% busy."""

    def read(self) -> HostSnapshot:
        return HostSnapshot(ram_total_mb=64000, ram_available_mb=40000, cpu_percent=37.5,
                            cpu_count=16, load_avg_1m=4.2)


@pytest.fixture
def outputs(isolated_dirs: dict[str, Path]) -> Path:
    return isolated_dirs["outputs"]


@pytest.fixture
def live_pids() -> Iterator[list[PidRef]]:
    """Two sleeping processes in their own sessions, standing in for live runs."""
    procs = [subprocess.Popen(["sleep", "600"], start_new_session=True) for _ in range(2)]
    try:
        yield [PidRef.of(p.pid) for p in procs]
    finally:
        for proc in procs:
            end_session(proc)


@pytest.fixture(scope="session")
def template_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """The fixture tree, built once (hundreds of fsync'd files) and copied per test."""
    root = tmp_path_factory.mktemp("template")
    dead = [PidRef(4_000_001, 1.0), PidRef(4_000_002, 1.0)]
    return root, build_runs(root, dead)


@pytest.fixture
def runs(outputs: Path, live_pids: list[PidRef],
         template_runs: tuple[Path, dict[str, Path]]) -> dict[str, Path]:
    """Run dirs in every state under this test's outputs root."""
    root, template = template_runs
    shutil.copytree(runs_root(root), runs_root(outputs), dirs_exist_ok=True)
    copied = {name: runs_root(outputs) / path.name for name, path in template.items()}
    relive(copied, live_pids)
    return copied


@pytest.fixture
def make_backend(outputs: Path) -> Iterator[Callable[..., EmbeddedBackend]]:
    made: list[JobScheduler] = []

    def make(*, gpus: bool = True) -> EmbeddedBackend:
        scheduler = JobScheduler(outputs, gpu_probe=StaticGpuProbe(gpus),
                                 host_probe=StaticHostProbe())
        made.append(scheduler)
        return EmbeddedBackend(scheduler, api_note="API: 127.0.0.1:8000",
                               owner="tester")

    yield make
    for scheduler in made:
        scheduler.stop()


@pytest.fixture
def clock() -> Callable[[], Any]:
    return lambda: NOW


@pytest.fixture
def app_factory(clock: Callable[[], Any]) -> Callable[..., EvalApp]:
    def build(*args: Any, **kwargs: Any) -> EvalApp:
        kwargs.setdefault("clock", clock)
        return make_app(*args, **kwargs)
    return build

