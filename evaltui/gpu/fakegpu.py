"""Fake GPUs for tests and the demo: ``EVALTUI_FAKE_GPUS="2x24576"`` (two 24576 MiB devices).

A process "allocates" fake VRAM by calling :func:`charge`; the charge is a file
``state_dir()/fakegpu/{gpu}/{pid}-{create_time}.json`` holding this process's MiB on that
device. The scheduler's FakeGpuProbe sums the charges of *live* processes only and
reports them per process, as NVML reports real usage: a process that exits, even by
SIGKILL, frees its fake memory exactly like a real one frees its VRAM.

This is the engine side (a run or a test nodeset calls it); it never imports the
scheduler. Nothing here does anything unless ``EVALTUI_FAKE_GPUS`` is set.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
from pathlib import Path

from evaltui.contract.pidref import PidRef
from evaltui.contract.settings import settings
from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.rundir.layout import PRIVATE_MODE, state_dir

FAKE_GPUS_ENV = "EVALTUI_FAKE_GPUS"
"""``NxMiB`` terms, comma separated: ``2x24576`` or ``1x24576,1x8192`` or ``24576,8192``."""
FAKE_GPU_INDEX_ENV = "EVALTUI_FAKE_GPU_INDEX"
"""The fake device the scheduler chose for a run (it also sets CUDA_VISIBLE_DEVICES); a run
with replicas gets every one it holds, comma-separated in the order chosen (``0,2,3``)."""
CHARGES_DIRNAME = "fakegpu"

_TERM_RE = re.compile(r"(?:([0-9]+)x)?([0-9]+)")
_lock = threading.Lock()
_charges: dict[int, int] = {}
_owner_pid: int | None = None
_me: PidRef | None = None


def parse_fake_gpus(value: str) -> list[int]:
    """Device sizes in MiB from an ``EVALTUI_FAKE_GPUS`` value (ValueError if malformed)."""
    sizes: list[int] = []
    for term in value.replace(" ", "").split(","):
        m = _TERM_RE.fullmatch(term)
        if m is None:
            raise ValueError(f"{FAKE_GPUS_ENV}={value!r}: {term!r} is not 'NxMiB' or 'MiB'")
        count, size = int(m.group(1) or 1), int(m.group(2))
        if count < 1 or size < 1:
            raise ValueError(f"{FAKE_GPUS_ENV}={value!r}: counts and sizes must be >= 1")
        sizes.extend([size] * count)
    return sizes


def fake_gpus() -> list[int] | None:
    """The fake devices' sizes, or None when ``EVALTUI_FAKE_GPUS`` is unset or empty."""
    value = settings().fake_gpus
    return parse_fake_gpus(value) if value else None


def charges_dir(gpu: int) -> Path:
    """Where the charge files of fake device ``gpu`` live."""
    return state_dir() / CHARGES_DIRNAME / str(gpu)


def charge_filename(ref: PidRef) -> str:
    """The charge file name of one process: ``{pid}-{create_time}.json``."""
    return f"{ref.pid}-{ref.create_time:.3f}.json"


def parse_charge_filename(name: str) -> PidRef | None:
    """The process a charge file belongs to, or None for a foreign file."""
    stem, dot, ext = name.rpartition(".")
    pid, dash, ctime = stem.partition("-")
    if not (dot and dash and ext == "json" and pid.isdigit()):
        return None
    try:
        return PidRef(int(pid), float(ctime))
    except ValueError:
        return None


def charge(mb: int, gpu: int | None = None) -> int:
    """Allocate ``mb`` MiB more on a fake device; returns this process's total there.

    ``gpu`` defaults to the device the scheduler gave the run (``EVALTUI_FAKE_GPU_INDEX``,
    else the first of ``CUDA_VISIBLE_DEVICES``). Raises RuntimeError when no fake device
    is visible, as CUDA would.
    """
    if mb < 0:
        raise ValueError(f"cannot charge a negative amount ({mb} MiB); use release()")
    device = _device(gpu)
    with _lock:
        _reset_after_fork()
        total = _charges.get(device, 0) + int(mb)
        _charges[device] = total
        _write(device, total)
    return total


def release(mb: int | None = None, gpu: int | None = None) -> int:
    """Free ``mb`` MiB (all of it if None) on a fake device; returns what stays charged."""
    device = _device(gpu)
    with _lock:
        _reset_after_fork()
        left = 0 if mb is None else max(0, _charges.get(device, 0) - int(mb))
        _charges[device] = left
        _write(device, left)
    return left


def charged(gpu: int | None = None) -> int:
    """What this process holds on a fake device, in MiB."""
    device = _device(gpu)
    with _lock:
        _reset_after_fork()
        return _charges.get(device, 0)


def _device(gpu: int | None) -> int:
    sizes = fake_gpus()
    if sizes is None:
        raise RuntimeError(f"no fake GPUs: {FAKE_GPUS_ENV} is not set")
    if gpu is None:
        gpu = _default_device()
    if not 0 <= gpu < len(sizes):
        raise RuntimeError(f"fake GPU {gpu} does not exist ({FAKE_GPUS_ENV} has {len(sizes)})")
    return gpu


def _default_device() -> int:
    current = settings()
    if current.fake_gpu_index:
        # A run with replicas is given several (``0,2,3``): it charges the first unless
        # told which; each replica's host is given its own one.
        first_index = current.fake_gpu_index.split(",")[0].strip()
        if not first_index.isdigit():
            raise RuntimeError(f"{FAKE_GPU_INDEX_ENV}={current.fake_gpu_index!r} is not "
                               "a GPU index or a comma-separated list of them")
        return int(first_index)
    visible = current.cuda_visible_devices
    if visible is None:
        return 0
    first = visible.split(",")[0].strip()
    if not first.isdigit():
        raise RuntimeError(f"no fake GPU visible (CUDA_VISIBLE_DEVICES={visible!r})")
    return int(first)


def _reset_after_fork() -> None:
    """A forked child inherits the dict but not the files: it starts with nothing charged."""
    global _owner_pid, _me
    if _owner_pid != os.getpid():
        _charges.clear()
        _owner_pid, _me = os.getpid(), PidRef.current()


def _write(device: int, total: int) -> None:
    assert _me is not None
    directory = charges_dir(device)
    path = directory / charge_filename(_me)
    if total <= 0:
        path.unlink(missing_ok=True)
        return
    directory.parent.mkdir(mode=0o700, exist_ok=True)  # in the state dir: private
    directory.mkdir(mode=0o700, exist_ok=True)
    write_json_atomic(path, {"pid": _me.pid, "create_time": _me.create_time, "mb": total},
                      mode=PRIVATE_MODE)


@atexit.register
def _release_all() -> None:
    """Remove this process's charge files on a normal exit (a crash leaves them to the probe)."""
    with _lock:
        if _owner_pid != os.getpid() or _me is None:
            return
        for device in list(_charges):
            (charges_dir(device) / charge_filename(_me)).unlink(missing_ok=True)
        _charges.clear()
