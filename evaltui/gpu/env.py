"""The environment that puts a process on GPUs of this machine: one function for the
scheduler pinning a run, the run pinning each replica host, a Slurm run pinning its
shared host (DESIGN §12 "Replicas")."""

from __future__ import annotations

from collections.abc import Sequence

from evaltui.gpu.fakegpu import FAKE_GPU_INDEX_ENV


def gpu_env(gpu: int | str | Sequence[int | str] | None, fake: bool) -> dict[str, str]:
    """Variables that put a process on ``gpu`` (none for no GPU), or on several GPUs,
    comma-separated in the order given (``0,2,3``: a run with replicas hosts one on each).
    Fake GPUs also get the fake index; real ones NVML's numbering (PCI order), so the
    index the scheduler measured is the device CUDA opens."""
    if gpu is None:
        return {}
    listed = str(gpu) if isinstance(gpu, int | str) else ",".join(str(g) for g in gpu)
    env = {"CUDA_VISIBLE_DEVICES": listed}
    if fake:
        env[FAKE_GPU_INDEX_ENV] = listed
    elif all(part.isdigit() for part in listed.split(",")):  # a UUID names one card anyway
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return env
