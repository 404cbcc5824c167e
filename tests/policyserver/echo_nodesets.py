"""Nodesets served by ``evaltui serve-policy module:Class`` in the tests and the benchmark."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from evaltui.engine.nodes import NodeSet, node


class TaggedEcho(NodeSet):
    """A batched model whose answer names its request: ``action = tag * 10 + 1``, and the
    batch it ran in. Its forward costs ``forward_ms`` plus ``item_ms`` per request (a
    model bound by an accelerator's per-call cost), so concurrent callers batch up."""

    batched: ClassVar[bool] = True
    batch_dim: ClassVar[str] = "obs"

    def __init__(self, forward_ms: float = 10.0, item_ms: float = 1.0) -> None:
        self.forward_ms, self.item_ms = forward_ms, item_ms

    @node(inputs=("obs",), outputs=("action", "batch"))
    def act(self, obs: Any) -> dict[str, Any]:
        tags = np.asarray(obs["tag"])
        if np.any(tags < 0):
            raise ValueError("tag must be >= 0")
        time.sleep((self.forward_ms + self.item_ms * len(tags)) / 1000.0)
        return {"action": tags * 10 + 1, "batch": np.full(len(tags), len(tags))}


class TwoOps(NodeSet):
    @node(inputs=("obs",), outputs=("action",))
    def act(self, obs: Any) -> dict[str, Any]:
        return {"action": 0}

    @node(inputs=("obs",), outputs=("value",))
    def value(self, obs: Any) -> dict[str, Any]:
        return {"value": 0.0}
