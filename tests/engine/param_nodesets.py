"""Nodesets that declare their params' constraints (a ``check_params`` classmethod), for
the spec-check tests. Imported through the spec's workspace (this dir)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltui.engine.nodes import NodeSet, node


class RangePolicy(NodeSet):
    """``low`` must not exceed ``high``: a constraint between two params."""

    def __init__(self, low: float = 0.0, high: float = 1.0) -> None:
        self.low, self.high = low, high

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> None:
        if params["low"] > params["high"]:
            raise ValueError(f"low: must be <= high ({params['high']}), got {params['low']}")
        if params["high"] > 100:
            raise ValueError("the range is too wide")
        if params["high"] < -100:
            params["no such key"]  # a bug in the check itself

    @node(inputs=("obs",), outputs=("action",))
    def act(self, obs: Any) -> dict[str, Any]:
        return {"action": 1}
