"""The wire between evaltui and a nodeset host in another Python environment.

This module runs on BOTH sides: in evaltui's interpreter and, shipped as source at start
(:mod:`evaltui.engine.foreign.boot`), inside the other environment, which may have an
older Python (3.8 syntax only, checked by a test) and numpy 1.x or none. So it imports
the stdlib only, and numpy lazily, when an array arrives.

A message is one frame::

    !Q  length of the rest
    !I  length of the JSON header
    header (UTF-8 JSON)     the value, arrays replaced by references to buffers
    buffers                 raw bytes, one after the other (lengths in the header)

Values: JSON's own types as they are; a tuple ``{"~t": [...]}``; a dict whose keys are not
all plain strings ``{"~d": [[k, v], ...]}``; bytes ``{"~b": i}``; a numpy array
``{"~a": [dtype.str, shape, i]}`` and a numpy scalar ``{"~s": [dtype.str, i]}`` (dtype,
shape and raw bytes, never a pickle: numpy 1.x on one side and 2.x on the other agree on
``dtype.str``); a :class:`~evaltui.engine.nodes.Frame` ``{"~f": pixels}`` and a
:class:`~evaltui.engine.nodes.Trajectory` ``{"~T": fields}``. Floats cross as JSON's
shortest repr, which round-trips exactly. Nothing else crosses: it raises TypeError
naming the type. Nothing here is ever unpickled.
"""

from __future__ import annotations

import json
import os
import struct

from evaltui.engine.nodes import Frame, Trajectory

_TOTAL = struct.Struct("!Q")
_HEAD = struct.Struct("!I")
_TAG = "~"


class WireClosed(EOFError):
    """The peer closed its end of the pipe."""


def _numpy():
    import numpy  # boot: a nodeset's own environment (engine/foreign) may have no numpy

    return numpy


def _encode(value, buffers):
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is float or kind is str:
        return value
    if kind is list:
        return [_encode(v, buffers) for v in value]
    if kind is dict:
        if all(type(k) is str and not k.startswith(_TAG) for k in value):
            return {k: _encode(v, buffers) for k, v in value.items()}
        return {"~d": [[_encode(k, buffers), _encode(v, buffers)] for k, v in value.items()]}
    if kind is tuple:
        return {"~t": [_encode(v, buffers) for v in value]}
    if kind.__module__ == "numpy":
        return _encode_numpy(value, buffers)
    if kind is bytes or kind is bytearray:
        buffers.append(bytes(value))
        return {"~b": len(buffers) - 1}
    if isinstance(value, Frame):
        return {"~f": _encode(value.pixels, buffers)}
    if isinstance(value, Trajectory):
        return {"~T": {"positions": _encode(list(value.positions), buffers),
                       "success": _encode(value.success, buffers),
                       "nav_error": _encode(value.nav_error, buffers),
                       "extra": _encode(dict(value.extra), buffers)}}
    for base in (bool, int, float, str):  # an IntEnum, a str subclass: as its base type
        if isinstance(value, base):
            return base(value)
    raise TypeError(f"cannot send a {kind.__module__}.{kind.__qualname__} across the "
                    "environment boundary (send numbers, strings, lists, dicts, tuples, bytes "
                    "or numpy arrays)")


def _encode_numpy(value, buffers):
    np = _numpy()
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise TypeError("cannot send an object array across the environment boundary")
        buffers.append(memoryview(np.ascontiguousarray(value).reshape(-1).view(np.uint8)))
        return {"~a": [value.dtype.str, list(value.shape), len(buffers) - 1]}
    if isinstance(value, np.generic):
        arr = np.asarray(value)
        if arr.dtype.hasobject:
            raise TypeError("cannot send a numpy object across the environment boundary")
        buffers.append(arr.tobytes())
        return {"~s": [arr.dtype.str, len(buffers) - 1]}
    raise TypeError(f"cannot send a numpy {type(value).__qualname__} across the environment "
                    "boundary")


def encode(value):
    """``value`` as the parts of one frame (join them, or write them one after another)."""
    buffers = []
    tree = _encode(value, buffers)
    sizes = [memoryview(b).nbytes for b in buffers]
    header = json.dumps([tree, sizes], separators=(",", ":")).encode()
    total = _HEAD.size + len(header) + sum(sizes)
    return [_TOTAL.pack(total) + _HEAD.pack(len(header)) + header] + buffers


def decode(frame):
    """The value of one frame's payload (everything after its ``!Q`` length)."""
    view = memoryview(frame)
    (head_len,) = _HEAD.unpack_from(view, 0)
    at = _HEAD.size + head_len
    tree, sizes = json.loads(bytes(view[_HEAD.size:at]))
    slices = []
    for size in sizes:
        slices.append(view[at:at + size])
        at += size
    return _decode(tree, slices)


def _decode(node, slices):
    kind = type(node)
    if kind is list:
        return [_decode(v, slices) for v in node]
    if kind is not dict:
        return node
    if len(node) == 1:
        (key,) = node
        if key.startswith(_TAG):
            return _decode_tagged(key, node[key], slices)
    return {k: _decode(v, slices) for k, v in node.items()}


def _decode_tagged(key, body, slices):
    if key == "~t":
        return tuple(_decode(v, slices) for v in body)
    if key == "~d":
        return {_decode(k, slices): _decode(v, slices) for k, v in body}
    if key == "~a":
        dtype, shape, i = body
        np = _numpy()
        return np.frombuffer(slices[i], dtype=np.dtype(dtype)).reshape(shape)
    if key == "~s":
        dtype, i = body
        np = _numpy()
        return np.frombuffer(slices[i], dtype=np.dtype(dtype))[0]
    if key == "~b":
        return bytes(slices[body])
    if key == "~f":
        return Frame(_decode(body, slices))
    if key == "~T":
        fields = {k: _decode(v, slices) for k, v in body.items()}
        return Trajectory(positions=[tuple(p) for p in fields["positions"]],
                          success=fields["success"], nav_error=fields["nav_error"],
                          extra=fields["extra"])
    raise ValueError(f"unknown tag {key!r} on the environment wire")


# ---- on a pair of pipes ---------------------------------------------------------------------

def send(fd, value):
    """Write one message to the file descriptor ``fd`` (whole, however large)."""
    parts = encode(value)
    data = b"".join(parts) if len(parts) > 1 else parts[0]
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd, size):
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = os.readv(fd, [view[got:]])
        if n == 0:
            raise WireClosed("the other side closed the pipe")
        got += n
    return buf


def recv(fd):
    """Read one message from the file descriptor ``fd``; WireClosed at its end."""
    (total,) = _TOTAL.unpack(_read_exact(fd, _TOTAL.size))
    return decode(_read_exact(fd, total))
