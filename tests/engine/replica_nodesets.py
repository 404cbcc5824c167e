"""A shared policy for the replica tests: it refuses to build on one given GPU."""

from __future__ import annotations

import os

from faulty_nodesets import BatchedStepPolicy


class GpuPickyPolicy(BatchedStepPolicy):
    """BatchedStepPolicy that cannot start where ``CUDA_VISIBLE_DEVICES == refuse_gpu``."""

    def __init__(self, refuse_gpu: str = "") -> None:
        if refuse_gpu and os.environ.get("CUDA_VISIBLE_DEVICES") == refuse_gpu:
            raise RuntimeError(f"no room on GPU{refuse_gpu}")
        super().__init__()
