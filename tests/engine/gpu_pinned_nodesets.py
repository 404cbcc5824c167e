"""A shared policy that charges fake VRAM where its host was put and says where that was
(the Slurm GPU placement tests, tests/slurm/test_slurm_gpus.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from evaltui.engine.nodes import NodeSet, node
from evaltui.gpu import fakegpu


class PinnedPolicy(NodeSet):
    """One step forward per request; at construction charges ``charge_mb`` on its fake
    GPU and writes ``{CUDA_VISIBLE_DEVICES, EVALTUI_FAKE_GPU_INDEX}`` to ``trace``."""

    def __init__(self, trace: str, charge_mb: int = 0) -> None:
        if charge_mb:
            fakegpu.charge(charge_mb)  # raises where no fake GPU is visible, as CUDA would
        Path(trace).write_text(json.dumps({
            k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "EVALTUI_FAKE_GPU_INDEX")}))

    @node(inputs=("obs",), outputs=("action",), batched=True, batch_dim="obs")
    def act(self, obs: Any) -> dict[str, Any]:
        return {"action": np.ones(len(obs), dtype=np.int64)}
