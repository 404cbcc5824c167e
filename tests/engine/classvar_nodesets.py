"""Shared policies that expect a batch, declared in both opt-in forms.

``DecoratedBatchPolicy`` uses ``@node(batched=True, batch_dim="obs")``;
``ClassVarBatchPolicy`` the class-variable form. Both refuse anything but a stacked batch
of observations (so being called one request at a time fails every episode), sleep a
little per call (so the other workers' requests queue up behind it), and append each
batch size to ``{trace_dir}/batches.{pid}``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from evaltui.engine.nodes import NodeSet, node


class _TracedBatches(NodeSet):
    def __init__(self, trace_dir: str = "", call_sleep_ms: float = 0.0) -> None:
        self.trace = Path(trace_dir) / f"batches.{os.getpid()}" if trace_dir else None
        self.call_sleep_ms = call_sleep_ms

    def _act(self, obs: Any) -> dict[str, Any]:
        if not (isinstance(obs, np.ndarray) and obs.ndim == 2):
            raise TypeError(f"expected a stacked batch of observations, got {obs!r}")
        if self.trace is not None:
            with self.trace.open("a") as fh:
                fh.write(f"{len(obs)}\n")
        if self.call_sleep_ms:
            time.sleep(self.call_sleep_ms / 1000.0)
        return {"action": np.ones(len(obs), dtype=np.int64)}


class DecoratedBatchPolicy(_TracedBatches):
    @node(inputs=("obs",), outputs=("action",), batched=True, batch_dim="obs")
    def act(self, obs: Any) -> dict[str, Any]:
        return self._act(obs)


class ClassVarBatchPolicy(_TracedBatches):
    batched: ClassVar[bool] = True
    batch_dim: ClassVar[str] = "obs"

    @node(inputs=("obs",), outputs=("action",))
    def act(self, obs: Any) -> dict[str, Any]:
        return self._act(obs)

    @node(inputs=("x",), outputs=("y",))
    def echo(self, x: Any) -> dict[str, Any]:
        return {"y": x}


class WrongBatchDimPolicy(ClassVarBatchPolicy):
    batch_dim: ClassVar[str] = "observation"
