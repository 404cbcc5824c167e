"""Packing node inputs and outputs as raw buffers: a layout string plus the bytes.

A hosted batched node is called with small dicts of numpy arrays, numbers and strings
(``{"obs": {"image": (7,7,3) uint8, "direction": 2, "mission": "go to the red ball"}}``).
Pickling such a dict costs more than the bytes it carries, and a host then builds one
array per request only to stack them again. Packed, a value is a *layout* -- its keys,
and per leaf a kind, dtype and shape -- and the leaves' raw bytes, concatenated. The
host parses a layout once (cached), and stacks the requests of a batch leaf by leaf
straight from their bytes: one ``frombuffer`` per leaf for the whole batch.

Packable: dicts with str keys of ndarrays (C-contiguous, numeric, bool or string
dtypes), numpy scalars, and exact ``int`` (64-bit), ``float``, ``bool``, ``str`` and
``None``. Anything else -- lists, objects, subclasses -- is not (:func:`pack` returns
None) and travels pickled, as before. Unpacking restores types exactly (an ``int``
comes back an ``int``, an ``np.int64`` an ``np.int64``, arrays writable), and stacking
packed values gives what :func:`evaltui.engine.hosting.stacking.stack` gives for the unpacked
ones, so the node cannot tell which way its inputs came.

Layout grammar (ASCII): a dict is ``{`` then per item ``<key length>:<key><leaf>`` then
``}``; leaves are ``a<dtype>,<dims x-separated>;`` (array), ``n<dtype>;`` (numpy
scalar), ``i`` ``f`` ``b`` ``z`` (int as int64, float as float64, bool as one byte,
None), ``s<byte length>;`` (UTF-8 str).
"""

from __future__ import annotations

import struct
from collections.abc import Hashable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

_STACKS_BY_BYTES = frozenset("biufc")
_PACKABLE_ARRAY_KINDS = frozenset("biufcUS")
_FIXED = {"i": ("<i8", 8), "f": ("<f8", 8), "b": ("|b1", 1)}
_CACHE_LIMIT = 4096


def pack(value: Mapping[str, Any]) -> tuple[bytes, bytes] | None:
    """``(layout, data)`` of a dict, or None if something in it is not packable."""
    layout: list[str] = []
    data: list[bytes] = []
    if not _pack_dict(value, layout, data):
        return None
    return "".join(layout).encode(), b"".join(data)


def _pack_dict(value: Any, layout: list[str], data: list[bytes]) -> bool:
    if type(value) is not dict:
        return False
    layout.append("{")
    for key, item in value.items():
        if type(key) is not str:
            return False
        layout.append(f"{len(key)}:{key}")
        if not _pack_leaf(item, layout, data):
            return False
    layout.append("}")
    return True


def _pack_leaf(item: Any, layout: list[str], data: list[bytes]) -> bool:
    kind = type(item)
    if kind is np.ndarray:
        dtype = item.dtype
        if (dtype.kind not in _PACKABLE_ARRAY_KINDS or not dtype.itemsize
                or not item.flags.c_contiguous):
            return False
        layout.append(_array_token(dtype, item.shape))
        data.append(item.tobytes())
    elif isinstance(item, np.generic):
        if item.dtype.kind not in _PACKABLE_ARRAY_KINDS or not item.dtype.itemsize:
            return False
        layout.append(f"n{item.dtype.str};")
        data.append(item.tobytes())
    elif kind is bool:
        layout.append("b")
        data.append(b"\x01" if item else b"\x00")
    elif kind is int:
        if not -(2**63) <= item < 2**63:
            return False
        layout.append("i")
        data.append(item.to_bytes(8, "little", signed=True))
    elif kind is float:
        layout.append("f")
        data.append(struct.pack("<d", item))
    elif kind is str:
        raw = item.encode()
        layout.append(f"s{len(raw)};")
        data.append(raw)
    elif item is None:
        layout.append("z")
    elif kind is dict:
        return _pack_dict(item, layout, data)
    else:
        return False
    return True


@lru_cache(maxsize=_CACHE_LIMIT)
def _array_token(dtype: np.dtype, shape: tuple[int, ...]) -> str:
    return f"a{dtype.str},{'x'.join(map(str, shape))};"


# ---- layouts -------------------------------------------------------------------------------

class Leaf:
    """One leaf of a parsed layout: where its bytes are and what they hold."""

    __slots__ = ("kind", "dtype", "shape", "offset", "size", "signature")

    def __init__(self, kind: str, dtype: np.dtype | None, shape: tuple[int, ...],
                 offset: int, size: int) -> None:
        self.kind, self.dtype, self.shape, self.offset, self.size = (
            kind, dtype, shape, offset, size)
        # What stacking.signature() says of the unpacked value.
        if kind in ("a", "n"):
            assert dtype is not None
            code = dtype.kind if dtype.kind in "US" else dtype.str
            self.signature: Hashable = ("leaf", shape, code)
        elif kind == "s":
            self.signature = ("leaf", (), "U")
        elif kind == "z":
            self.signature = ("leaf", (), np.dtype(object).str)
        else:
            self.signature = ("leaf", (), _FIXED[kind][0])

    def stacks_by_bytes(self) -> bool:
        """Whether the batch of this leaf is the requests' bytes joined."""
        if self.kind in _FIXED:
            return True
        return self.kind in ("a", "n") and self.dtype is not None and \
            self.dtype.kind in _STACKS_BY_BYTES

    def value(self, data: bytearray | memoryview) -> Any:
        kind, o = self.kind, self.offset
        if kind == "a":
            count = self.size // self.dtype.itemsize  # type: ignore[union-attr]
            return np.frombuffer(data, self.dtype, count, o).reshape(self.shape)
        if kind == "n":
            return np.frombuffer(data, self.dtype, 1, o)[0]
        if kind == "i":
            return int.from_bytes(data[o:o + 8], "little", signed=True)
        if kind == "f":
            return struct.unpack_from("<d", data, o)[0]
        if kind == "b":
            return data[o] != 0
        if kind == "s":
            return bytes(data[o:o + self.size]).decode()
        return None


Plan = dict[str, Any]
"""A parsed dict layout: key -> Leaf or nested Plan, in the packed order."""


@lru_cache(maxsize=_CACHE_LIMIT)
def parse_layout(layout: bytes) -> tuple[Plan, int]:
    """The plan of a layout and the number of data bytes it describes (cached)."""
    text = layout.decode("ascii")
    plan, end, size = _parse_dict(text, 0, 0)
    if end != len(text):
        raise ValueError(f"malformed layout: trailing {text[end:]!r}")
    return plan, size


def _parse_dict(text: str, i: int, offset: int) -> tuple[Plan, int, int]:
    if text[i] != "{":
        raise ValueError(f"malformed layout at {i}: expected '{{'")
    i += 1
    plan: Plan = {}
    while text[i] != "}":
        colon = text.index(":", i)
        n = int(text[i:colon])
        key = text[colon + 1:colon + 1 + n]
        i = colon + 1 + n
        if text[i] == "{":
            plan[key], i, offset = _parse_dict(text, i, offset)
            continue
        leaf, i = _parse_leaf(text, i, offset)
        plan[key] = leaf
        offset += leaf.size
    return plan, i + 1, offset


def _parse_leaf(text: str, i: int, offset: int) -> tuple[Leaf, int]:
    kind = text[i]
    if kind in _FIXED:
        return Leaf(kind, None, (), offset, _FIXED[kind][1]), i + 1
    if kind == "z":
        return Leaf(kind, None, (), offset, 0), i + 1
    end = text.index(";", i)
    body = text[i + 1:end]
    if kind == "s":
        return Leaf(kind, None, (), offset, int(body)), end + 1
    if kind == "n":
        dtype = np.dtype(body)
        return Leaf(kind, dtype, (), offset, dtype.itemsize), end + 1
    if kind == "a":
        code, dims = body.split(",")
        dtype = np.dtype(code)
        shape = tuple(int(d) for d in dims.split("x")) if dims else ()
        return Leaf(kind, dtype, shape, offset, dtype.itemsize * int(np.prod(shape))), end + 1
    raise ValueError(f"malformed layout at {i}: unknown leaf kind {kind!r}")


# ---- packed values -------------------------------------------------------------------------

class Packed:
    """A packed dict (a plan over bytes); the host's form of a request's inputs."""

    __slots__ = ("layout", "plan", "data")

    def __init__(self, layout: bytes, plan: Plan, data: bytearray | memoryview) -> None:
        self.layout = layout
        self.plan = plan
        self.data = data

    @classmethod
    def from_wire(cls, layout: bytes, data: bytearray | memoryview) -> Packed:
        plan, size = parse_layout(layout)
        if size != len(data):
            raise ValueError(f"packed data is {len(data)} bytes, its layout says {size}")
        return cls(layout, plan, data)

    def port_signature(self, name: str) -> Hashable:
        """The stacking signature of one port's value (cached per layout)."""
        return _port_signature(self.layout, name)

    def unpack(self) -> dict[str, Any]:
        return _unpack(self.plan, self.data)

    def port(self, name: str) -> PackedValue:
        return PackedValue(self.plan[name], self.data)

    def keys(self) -> list[str]:
        return list(self.plan)

    def __contains__(self, name: object) -> bool:
        return name in self.plan


class PackedValue:
    """One port's value inside a Packed request: a Leaf or a sub-plan, over the bytes."""

    __slots__ = ("node", "data")

    def __init__(self, node: Leaf | Plan, data: bytearray | memoryview) -> None:
        self.node = node
        self.data = data

    def unpack(self) -> Any:
        if isinstance(self.node, Leaf):
            return self.node.value(self.data)
        return _unpack(self.node, self.data)


def _unpack(plan: Plan, data: bytearray | memoryview) -> dict[str, Any]:
    return {k: v.value(data) if isinstance(v, Leaf) else _unpack(v, data)
            for k, v in plan.items()}


@lru_cache(maxsize=_CACHE_LIMIT)
def _port_signature(layout: bytes, name: str) -> Hashable:
    return _signature(parse_layout(layout)[0][name])


def _signature(node: Leaf | Plan) -> Hashable:
    if isinstance(node, Leaf):
        return node.signature
    items = sorted(node.items(), key=lambda kv: kv[0])
    return ("dict", tuple((k, _signature(v)) for k, v in items))


def stack_packed(values: Sequence[PackedValue]) -> Any:
    """Stack values of one signature on a new leading axis, straight from their bytes."""
    return _stack_nodes([v.node for v in values], [v.data for v in values])


def _stack_nodes(nodes: Sequence[Leaf | Plan], datas: Sequence[Any]) -> Any:
    first = nodes[0]
    if not isinstance(first, Leaf):
        return {k: _stack_nodes([n[k] for n in nodes], datas)  # type: ignore[index]
                for k in first}
    leaves: Sequence[Leaf] = nodes  # type: ignore[assignment]
    if first.stacks_by_bytes():
        joined = bytearray().join(memoryview(d)[leaf.offset:leaf.offset + leaf.size]
                                  for leaf, d in zip(leaves, datas, strict=True))
        dtype = first.dtype if first.dtype is not None else np.dtype(_FIXED[first.kind][0])
        return np.frombuffer(joined, dtype).reshape((len(leaves), *first.shape))
    values = [leaf.value(d) for leaf, d in zip(leaves, datas, strict=True)]
    if first.kind == "s" and all(leaf.kind == "s" for leaf in leaves):
        return np.array(values)  # the dtype np.stack would give: <U(longest)
    # Strings (their itemsizes differ) and None: exactly as stacking.stack does it.
    return np.stack([np.asarray(v) for v in values])
