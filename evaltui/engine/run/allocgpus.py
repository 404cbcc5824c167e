"""GPUs inside a Slurm allocation (docs/slurm.md, "GPUs inside the allocation").

Slurm gives a job's steps their GPUs through gres: ``CUDA_VISIBLE_DEVICES`` (and
``SLURM_JOB_GPUS`` in the batch step, ``SLURM_STEP_GPUS`` in a step) name the devices
allocated on that node, and a step without GPUs gets no ``CUDA_VISIBLE_DEVICES`` at all.
Everything else comes from the submitting shell (sbatch exports it), so a login node's
``EVALTUI_FAKE_GPU_INDEX`` would follow the job and name a device it was never given:
:func:`adopt_slurm_gpus` makes the fake index follow Slurm's GPUs, as the scheduler's
``CUDA_VISIBLE_DEVICES`` + fake index pair does on one machine.

A shared nodeset the run hosts itself is then pinned to one of the allocated GPUs, the one
with the most memory free as measured when its host starts (fake devices: their size less
the live charges; real ones: NVML), ties to the first listed -- the one-machine rule of
admission (most free memory first). Replicas (one host per GPU) are
:mod:`evaltui.engine.run.replicas`' and do not come here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from evaltui.contract.settings import reset_settings
from evaltui.engine.executor.kinds import executor_kind
from evaltui.gpu.env import gpu_env
from evaltui.gpu.fakegpu import FAKE_GPU_INDEX_ENV, charges_dir, fake_gpus, parse_charge_filename
from evaltui.gpu.nvml import nvml_ask
from evaltui.rundir.jsonfiles import read_json

if TYPE_CHECKING:
    from evaltui.contract.spec import JobSpec

CUDA_ENV = "CUDA_VISIBLE_DEVICES"


def adopt_slurm_gpus(environ: MutableMapping[str, str] = os.environ) -> list[str]:
    """Inside a Slurm job: the GPUs Slurm allocated here (``CUDA_VISIBLE_DEVICES`` as gres
    set it), with ``EVALTUI_FAKE_GPU_INDEX`` made to name the same devices (fake GPUs) or
    removed (no GPU allocated). Outside a job: nothing changes, and []."""
    if not environ.get("SLURM_JOB_ID"):
        return []
    slurm_set = environ.get("SLURM_STEP_GPUS") or environ.get("SLURM_JOB_GPUS")
    visible = _split(environ.get(CUDA_ENV)) if slurm_set is not None else []
    if visible:
        if environ.get("EVALTUI_FAKE_GPUS"):
            environ[FAKE_GPU_INDEX_ENV] = ",".join(visible)
    else:
        environ.pop(FAKE_GPU_INDEX_ENV, None)
    reset_settings()  # settings() read the submitter's values
    return visible


def allocation_host_env(spec: JobSpec, environ: Mapping[str, str] = os.environ
                        ) -> dict[str, str]:
    """What a shared nodeset's host gets in its environment: inside a Slurm job that asked
    for gres, the allocated GPU with the most free memory now; else nothing."""
    ev = spec.eval
    if not executor_kind(ev.executor).batch or not ev.slurm.gres \
            or not environ.get("SLURM_JOB_ID"):
        return {}
    return host_gpu_env(_split(environ.get(CUDA_ENV)))


def host_gpu_env(visible: Sequence[str],
                 free_mb: Callable[[str], int | None] | None = None) -> dict[str, str]:
    """The environment pinning one host to the GPU of ``visible`` with the most free
    memory (``free_mb``: measured now); {} when there is none to choose."""
    gpu = most_free(visible, free_mb or measured_free_mb)
    if gpu is None:
        return {}
    return gpu_env(gpu, fake_gpus() is not None)


def most_free(visible: Sequence[str], free_mb: Callable[[str], int | None]) -> str | None:
    """The GPU of ``visible`` with the most free memory, ties (and unmeasurable ones, read
    as 0) to the first listed; None for no GPU."""
    best: tuple[int, str] | None = None
    for gpu in visible:
        free = free_mb(gpu) or 0
        if best is None or free > best[0]:
            best = (free, gpu)
    return best[1] if best is not None else None


def measured_free_mb(gpu: str) -> int | None:
    """Free memory of one device in MiB as measured now; None where it cannot be."""
    sizes = fake_gpus()
    if sizes is not None:
        if not gpu.isdigit() or int(gpu) >= len(sizes):
            return None
        return sizes[int(gpu)] - _fake_charged_mb(int(gpu))
    return _nvml_free_mb(gpu)


def _fake_charged_mb(gpu: int) -> int:
    """What live processes hold on fake device ``gpu`` (a dead one's charge is free)."""
    total = 0
    try:
        entries = list(charges_dir(gpu).iterdir())
    except FileNotFoundError:
        return 0
    for path in entries:
        ref = parse_charge_filename(path.name)
        if ref is None or not ref.alive():
            continue
        try:
            mb = read_json(path).get("mb", 0)
        except (OSError, ValueError, AttributeError):
            continue  # gone meanwhile, or half a file: not counted
        total += mb if isinstance(mb, int) else 0
    return total


def _nvml_free_mb(gpu: str) -> int | None:
    """None unmeasured (no NVML: the first GPU wins)."""
    def free_mb(nvml: Any) -> int:
        handle = nvml.nvmlDeviceGetHandleByUUID(gpu) if not gpu.isdigit() else \
            nvml.nvmlDeviceGetHandleByIndex(int(gpu))
        return int(nvml.nvmlDeviceGetMemoryInfo(handle).free) // (1 << 20)

    return nvml_ask(free_mb, None)


def _split(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]
