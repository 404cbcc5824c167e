"""Probes: NVML (absent here, and a stand-in module), fake GPUs charged by real processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evaltui.gpu import fakegpu
from evaltui.scheduler.admission.resources import (
    FakeGpuProbe,
    HostProbe,
    NvmlProbe,
    UnavailableProbe,
    make_gpu_probe,
)

MIB = 1 << 20


def test_without_nvml_the_probe_says_so_and_never_raises() -> None:
    probe = NvmlProbe()
    reading = probe.read()
    assert reading.available is False and reading.gpus == ()
    assert reading.reason is not None and reading.reason.startswith("NVML unavailable: ")
    assert probe.read().reason == reading.reason  # re-tries are throttled, still no raise
    probe.close()


class StandInNvml:
    """The slice of pynvml NvmlProbe uses, for one 24 GiB board with two processes."""

    def __init__(self, per_process: list[tuple[int, int | None]]) -> None:
        self.per_process = per_process
        self.shutdown = False

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None:
        self.shutdown = True
    def nvmlDeviceGetCount(self) -> int:
        return 1
    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"h{index}"
    def nvmlDeviceGetName(self, handle: str) -> bytes:
        return b"Stand-in 24GB"
    def nvmlDeviceGetMemoryInfo(self, handle: str) -> Any:
        return SimpleNamespace(total=24576 * MIB, used=6144 * MIB, free=18432 * MIB)
    def nvmlDeviceGetUtilizationRates(self, handle: str) -> Any:
        raise RuntimeError("not supported")
    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[Any]:
        return [SimpleNamespace(pid=p, usedGpuMemory=None if b is None else b * MIB)
                for p, b in self.per_process]
    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: str) -> list[Any]:
        return [SimpleNamespace(pid=self.per_process[0][0], usedGpuMemory=100 * MIB)]


def test_nvml_reading_with_per_process_usage() -> None:
    nvml = StandInNvml([(111, 4000), (222, 2000)])
    probe = NvmlProbe(nvml)
    reading = probe.read()
    assert reading.available and not reading.fake
    (g,) = reading.gpus
    assert (g.name, g.total_mb, g.used_mb, g.free_mb) == ("Stand-in 24GB", 24576, 6144, 18432)
    assert g.utilization_pct is None  # unsupported meter stays blank, no error
    assert [(p.pid, p.used_mb) for p in g.processes or ()] == [(111, 4100), (222, 2000)]
    probe.close()
    assert nvml.shutdown


def test_nvml_without_per_process_usage_reports_none() -> None:
    reading = NvmlProbe(StandInNvml([(111, None)])).read()
    assert reading.gpus[0].processes is None


def test_fake_probe_only_with_the_variable(fake_gpus: Callable[[str], None]) -> None:
    assert isinstance(make_gpu_probe(), NvmlProbe)
    fake_gpus("2x24576")
    probe = make_gpu_probe()
    assert isinstance(probe, FakeGpuProbe) and probe.sizes_mb == [24576, 24576]
    fake_gpus("two GPUs")
    bad = make_gpu_probe()
    assert isinstance(bad, UnavailableProbe)
    assert bad.read().reason is not None and "EVALTUI_FAKE_GPUS" in (bad.read().reason or "")


def test_parse_fake_gpus() -> None:
    assert fakegpu.parse_fake_gpus("2x24576") == [24576, 24576]
    assert fakegpu.parse_fake_gpus("1x24576, 8192") == [24576, 8192]
    with pytest.raises(ValueError):
        fakegpu.parse_fake_gpus("0x100")


CHARGER = textwrap.dedent("""
    import sys, time
    from evaltui.gpu import fakegpu
    fakegpu.charge(int(sys.argv[1]), gpu=int(sys.argv[2]))
    print("charged", flush=True)
    if sys.argv[3] == "hold":
        time.sleep(600)
""")


def test_fake_usage_is_charged_per_live_process(
        fake_gpus: Callable[[str], None], popen: Callable[..., subprocess.Popen[bytes]]) -> None:
    fake_gpus("2x24576")
    probe = FakeGpuProbe([24576, 24576])
    holder = popen([sys.executable, "-c", CHARGER, "5000", "1", "hold"], stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline() == b"charged\n"
    quitter = subprocess.run([sys.executable, "-c", CHARGER, "7000", "1", "exit"],
                             capture_output=True, check=True)
    assert quitter.stdout == b"charged\n"
    g0, g1 = probe.read().gpus
    assert g0.used_mb == 0 and g0.processes == ()
    assert g1.used_mb == 5000 and g1.free_mb == 24576 - 5000  # the exited one freed its 7000
    assert [(p.pid, p.used_mb) for p in g1.processes or ()] == [(holder.pid, 5000)]
    holder.send_signal(signal.SIGKILL)  # no release: death alone frees the memory
    holder.wait()
    assert probe.read().gpus[1].used_mb == 0
    assert list(fakegpu.charges_dir(1).iterdir()) == []  # the stale charge file is gone


def test_charge_in_this_process(fake_gpus: Callable[[str], None],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    fake_gpus("1x1000")
    monkeypatch.setenv(fakegpu.FAKE_GPU_INDEX_ENV, "0")
    try:
        assert fakegpu.charge(300) == 300
        assert fakegpu.charge(200) == 500
        assert FakeGpuProbe([1000]).read().gpus[0].used_mb == 500
        assert fakegpu.release(100) == 400
    finally:
        fakegpu.release()
    assert FakeGpuProbe([1000]).read().gpus[0].used_mb == 0
    monkeypatch.delenv(fakegpu.FAKE_GPU_INDEX_ENV)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(RuntimeError, match="no fake GPU visible"):
        fakegpu.charge(1)


def test_no_charge_without_fake_gpus() -> None:
    with pytest.raises(RuntimeError, match="EVALTUI_FAKE_GPUS is not set"):
        fakegpu.charge(1)


def test_host_probe(tmp_path: Path) -> None:
    snap = HostProbe().read()
    assert 0 < snap.ram_available_mb <= snap.ram_total_mb
    assert snap.cpu_count >= 1 and 0.0 <= snap.cpu_percent <= 100.0 * snap.cpu_count
