"""Stacking requests for a batched node, and scattering its outputs back (DESIGN §5).

A node declared ``@node(..., batched=True, batch_dim="obs")`` is always called with a
batch: its ``obs`` input is the requests' values stacked on a new leading axis (a dict
value is stacked key by key, so ``{"image": (7,7,3), "mission": str}`` becomes
``{"image": (B,7,7,3), "mission": (B,) str}``), every other input is a list of the
requests' values, and every output it returns is stacked on the leading axis (an array
of length B, a list of B values, or a dict of those). Requests whose batch_dim values
do not stack together (another shape, dtype or key set) have different
:func:`signature` values and are never put in one batch.

Requests that came over the wire packed (:mod:`evaltui.engine.hosting.packing`) are stacked
straight from their bytes, with the same result as stacking their unpacked values.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from evaltui.engine.hosting.packing import Packed, PackedValue, stack_packed
from evaltui.engine.nodes import NodeSet, NodeSpec

_MISSING = ("<missing>",)


def signature(value: Any) -> Hashable:
    """What must agree between values for them to stack: structure, shapes, dtypes."""
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: str(kv[0]))
        return ("dict", tuple((str(k), signature(v)) for k, v in items))
    arr = np.asarray(value)
    # Strings of different lengths stack fine; numbers of different dtypes would be
    # silently upcast, so those never share a batch.
    dtype = arr.dtype.kind if arr.dtype.kind in "US" else arr.dtype.str
    return ("leaf", arr.shape, dtype)


def request_signature(spec: NodeSpec, inputs: Mapping[str, Any] | Packed) -> Hashable:
    """The signature of one request to a batched node (its batch_dim value and ports)."""
    dim = spec.batch_dim or ""
    if isinstance(inputs, Packed):
        sig = inputs.port_signature(dim) if dim in inputs else signature(_MISSING)
        return (tuple(sorted(inputs.keys())), sig)
    batch_value = inputs[dim] if dim in inputs else _MISSING
    return (tuple(sorted(inputs)), signature(batch_value))


def stack(values: Sequence[Any]) -> Any:
    """Stack values of one signature on a new leading axis (dicts key by key)."""
    first = values[0]
    if isinstance(first, PackedValue):
        if all(isinstance(v, PackedValue) for v in values):
            return stack_packed(values)
        values = [_unpacked(v) for v in values]
        first = values[0]
    if isinstance(first, Mapping):
        return {k: stack([v[k] for v in values]) for k in first}
    return np.stack([np.asarray(v) for v in values])


def unstack(value: Any, n: int, where: str = "output") -> list[Any]:
    """Split a value stacked on its leading axis into ``n`` per-request values."""
    if isinstance(value, Mapping):
        parts = {k: unstack(v, n, f"{where}.{k}") for k, v in value.items()}
        return [{k: parts[k][i] for k in parts} for i in range(n)]
    if isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[0] == n:
        return [value[i].copy() if value.ndim > 1 else value[i] for i in range(n)]
    if isinstance(value, list | tuple) and len(value) == n:
        return list(value)
    got = (f"shape {value.shape}" if isinstance(value, np.ndarray)
           else f"{type(value).__name__} of length {len(value)}"
           if isinstance(value, list | tuple) else type(value).__name__)
    raise ValueError(f"batched node {where} must be stacked on the leading axis with "
                     f"{n} entries, got {got}")


def call_stacked(nodeset: NodeSet, spec: NodeSpec,
                 requests: Sequence[Mapping[str, Any] | Packed]) -> list[dict[str, Any]]:
    """Call a batched node once for all ``requests``; one output dict per request."""
    n = len(requests)
    inputs = {port: stack([_port(r, port) for r in requests]) if port == spec.batch_dim
              else [_unpacked(_port(r, port)) for r in requests] for port in spec.inputs}
    out = nodeset.call(spec.op, inputs)
    per_port = {port: unstack(value, n, f"{spec.op}.{port}") for port, value in out.items()}
    return [{port: per_port[port][i] for port in per_port} for i in range(n)]


def _port(request: Mapping[str, Any] | Packed, port: str) -> Any:
    return request.port(port) if isinstance(request, Packed) else request[port]


def _unpacked(value: Any) -> Any:
    return value.unpack() if isinstance(value, PackedValue) else value


class BatchOfOne:
    """Wraps a nodeset hosted in-process so its batched nodes get batches of one.

    Everything but ``call`` is passed through, so an env nodeset stays an env.
    """

    def __init__(self, nodeset: NodeSet) -> None:
        self.nodeset = nodeset
        self._batched = {op: s for op, s in type(nodeset).node_specs().items() if s.batched}

    def call(self, op: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        spec = self._batched.get(op)
        if spec is None:
            return self.nodeset.call(op, inputs)
        return call_stacked(self.nodeset, spec, [inputs])[0]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.nodeset, name)


def has_batched_nodes(cls: type[NodeSet]) -> bool:
    return any(s.batched for s in cls.node_specs().values())
