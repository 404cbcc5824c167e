"""The GPUs a run may place replicas on, as its environment gives them.

The scheduler starts a multi-GPU run with ``CUDA_VISIBLE_DEVICES=a,b,c`` (the GPUs it
reserved, in the order it chose) and, with fake GPUs, ``EVALTUI_FAKE_GPU_INDEX=a,b,c``.
A run started without a scheduler takes the GPUs it sees: every fake device
(``EVALTUI_FAKE_GPUS``), else every NVML device. The engine does not import the
scheduler's probe: a device count is all this needs, read through NVML directly.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaltui.contract.settings import settings
from evaltui.gpu.env import gpu_env
from evaltui.gpu.fakegpu import fake_gpus
from evaltui.gpu.nvml import nvml_ask


@dataclass(frozen=True)
class RunGpu:
    """One GPU a replica may run on: the id to hand the host and its display label."""

    device: str
    """The value of the host's ``CUDA_VISIBLE_DEVICES`` (an index or a GPU UUID)."""
    fake: bool = False
    """A fake device: the host also gets ``EVALTUI_FAKE_GPU_INDEX=device``."""

    @property
    def label(self) -> str:
        """``GPU1`` (the scheduler's label); a UUID as it is."""
        return f"GPU{self.device}" if self.device.isdigit() else self.device

    def env(self) -> dict[str, str]:
        """What a host on this GPU gets in its environment."""
        return gpu_env(self.device, self.fake)


def run_gpus() -> list[RunGpu]:
    """The GPUs this run may use, in the order given (empty: none)."""
    current = settings()
    visible = _split(current.cuda_visible_devices)
    sizes = fake_gpus()
    if sizes is not None:
        given = _split(current.fake_gpu_index) or visible
        ids = given if given is not None else [str(i) for i in range(len(sizes))]
        return [RunGpu(i, fake=True) for i in ids if i.isdigit() and int(i) < len(sizes)]
    if visible is not None:
        # CUDA reads the list up to its first invalid entry ("-1" hides every GPU).
        ids = []
        for entry in visible:
            if entry.startswith("-") or not entry:
                break
            ids.append(entry)
        return [RunGpu(i) for i in ids]
    return [RunGpu(str(i)) for i in range(_nvml_count())]


def _split(value: str | None) -> list[str] | None:
    """A comma list (None when unset; an empty value is an empty list: no GPU)."""
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def _nvml_count() -> int:
    """NVML's device count; 0 without NVML or a driver (a CPU-only machine)."""
    return nvml_ask(lambda nvml: int(nvml.nvmlDeviceGetCount()), 0)
