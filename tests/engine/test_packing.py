"""Packed node inputs/outputs: exact round trips, and stacking equal to the unpacked way."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from faulty_nodesets import BatchedStepPolicy

from evaltui.engine.hosting.packing import Packed, pack, parse_layout
from evaltui.engine.hosting.stacking import call_stacked, request_signature, stack


def wire(value: dict[str, Any]) -> Packed:
    packed = pack(value)
    assert packed is not None
    layout, data = packed
    return Packed.from_wire(layout, bytearray(data))


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types (arrays: dtype, shape, contents)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a == b
    return a == b or (a != a and b != b)  # NaN


def obs(i: int) -> dict[str, Any]:
    rng = np.random.default_rng(i)
    return {"image": rng.integers(0, 11, (7, 7, 3), dtype=np.uint8), "direction": i % 4,
            "mission": ["go to the red ball", "go to a purple box", "é ü"][i % 3]}


VALUES = [
    obs(0),
    {"x": np.arange(6.0).reshape(2, 3), "big": np.arange(4, dtype=">i4"), "flag": True,
     "n": -(2**63), "f": float("nan"), "none": None, "s": "", "u": np.array(["ab", "c"]),
     "scalar": np.int64(3), "f32": np.float32(1.5), "nested": {"a": {"b": 1}, "c": 2.5},
     "empty": np.zeros((0, 3)), "bytes_str": np.bytes_("xy"), "c": np.complex64(1 + 2j)},
    {},
]


@pytest.mark.parametrize("value", VALUES)
def test_unpack_restores_exact_values_and_types(value: dict[str, Any]) -> None:
    out = wire(value).unpack()
    assert same(out, value)
    for v in out.values():  # arrays come back writable, like unpickled ones
        if isinstance(v, np.ndarray):
            v[...] = v


@pytest.mark.parametrize("value", [
    {"l": [1, 2]}, {"t": (1,)}, {1: 2}, {"o": np.array([None])}, {"big": 2**63},
    {"f": np.asfortranarray(np.ones((2, 3)))}, {"obj": object()}, {"v": np.void(b"x")},
    {"sub": np.ma.masked_array([1])}, {"b": b"raw"},
])
def test_what_does_not_pack_exactly_is_left_to_pickle(value: dict[str, Any]) -> None:
    assert pack(value) is None


def test_stacking_packed_requests_equals_stacking_their_values() -> None:
    requests = [{"obs": obs(i), "tag": f"t{i}"} for i in range(8)]
    packed = [wire(r) for r in requests]
    batch = stack([p.port("obs") for p in packed])
    expected = stack([r["obs"] for r in requests])
    assert same(batch, expected)
    assert batch["image"].flags.writeable and batch["image"].flags.c_contiguous

    policy = BatchedStepPolicy()
    spec = type(policy).node_specs()["double"]
    numeric = [{"x": np.full(3, float(i)), "tag": i} for i in range(4)]
    assert all(same(a, b) for a, b in zip(
        call_stacked(policy, spec, [wire(r) for r in numeric]),
        call_stacked(policy, spec, numeric), strict=True))


def test_signatures_agree_with_the_unpacked_ones() -> None:
    policy = BatchedStepPolicy()
    spec = type(policy).node_specs()["act"]
    values = [{"obs": obs(1)}, {"obs": obs(2)}, {"obs": {**obs(3), "direction": 2.0}},
              {"obs": np.zeros(3)}, {"obs": "text"}, {"other": 1}, {"obs": None}]
    for value in values:
        assert request_signature(spec, wire(value)) == request_signature(spec, value)
    # missions of other lengths still share a batch; a float direction does not
    sigs = {request_signature(spec, wire(v)) for v in values[:3]}
    assert len(sigs) == 2


def test_layouts_are_parsed_once_and_checked() -> None:
    layout, data = pack(obs(0))  # type: ignore[misc]
    assert parse_layout(layout) is parse_layout(layout)
    with pytest.raises(ValueError, match="bytes"):
        Packed.from_wire(layout, bytearray(data + b"x"))
    for bad in (b"{1:xq}", b"{1:x", b"[", b"{1:xa<i8,2x;}"):
        with pytest.raises((ValueError, IndexError, TypeError)):
            parse_layout(bad)
