"""What a graph asks of GPUs through its replicated shared nodesets (DESIGN §12 "Replicas").

A shared nodeset with ``replicas`` is hosted once per GPU. The run as a whole asks for
one GPU per replica: ``most`` GPUs at best (None: every GPU it may have, ``per_gpu``) and
``least`` (``min_replicas``) before it may start. With several replicated nodesets the
run asks for the widest: ``per_gpu`` if any says so, else the largest N, and the largest
``min_replicas`` (each GPU then hosts one replica of each).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evaltui.contract.spec import PER_GPU
from evaltui.engine.graph.definition import GraphDefinition, GraphError


@dataclass(frozen=True)
class ReplicaAsk:
    """GPUs a run with replicas asks for: up to ``most`` (None: all), at least ``least``."""

    most: int | None
    least: int = 1

    def describe(self) -> str:
        """``per_gpu`` / ``3`` / ``2..4``, for reasons and listings."""
        top = PER_GPU if self.most is None else str(self.most)
        return top if self.least == 1 or self.least == self.most else f"{self.least}..{top}"


def replica_ask(graph: dict[str, Any]) -> ReplicaAsk | None:
    """The run's ask (None: no replicated nodeset, one GPU as ever); a graph that does
    not parse asks nothing here (its run fails on its own error)."""
    try:
        definition = GraphDefinition.from_dict(graph)
    except GraphError:
        return None
    asks = [ns for ns in definition.nodesets.values() if ns.replicas is not None]
    if not asks:
        return None
    most = None if any(ns.replicas == PER_GPU for ns in asks) else \
        max(int(ns.replicas) for ns in asks)  # type: ignore[arg-type]
    least = max(ns.min_replicas for ns in asks)
    return ReplicaAsk(most, least)
