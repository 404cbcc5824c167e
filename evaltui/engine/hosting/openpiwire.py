"""The openpi policy-server dialect: msgpack frames with numpy arrays, no pickle (DESIGN §13).

openpi's websocket policy server, and the servers built like it (starVLA,
vla-evaluation-harness, lerobot's), speak one protocol: on connect the server sends one
binary msgpack frame of metadata; then each binary frame from the client is one request
(a msgpack map) and the server answers it with one binary frame (a msgpack map); a
*text* frame from the server is an error message. Arrays travel as maps
``{b"__ndarray__": True, b"data": raw bytes, b"dtype": dtype.str, b"shape": [...]}``
and numpy scalars as ``{b"__npgeneric__": True, b"data": value, b"dtype": dtype.str}``
(the keys are msgpack *bin*, not str). A request ``{"__ctrl__": "episode_start", ...}``
is a control frame, answered ``{"__ack__": "episode_start"}``. The API key travels as
``Authorization: Api-Key KEY`` (openpi-client's header); ``Api-Key: KEY`` is accepted too.

This module is the one owner of that format, for evaltui's client nodesets
(:mod:`evaltui.nodesets.openpi`) and its server (:mod:`evaltui.engine.hosting.policyserver`).
Object, void and complex arrays are refused both ways: nothing here ever unpickles.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgpack
import numpy as np

CTRL_KEY = "__ctrl__"
ACK_KEY = "__ack__"
EPISODE_START, EPISODE_END = "episode_start", "episode_end"
EPISODE_ID_KEY = "__episode_id__"
TIMING_KEY = "server_timing"
_ND, _NG = b"__ndarray__", b"__npgeneric__"
_REFUSED_KINDS = frozenset("VOc")


class WireError(ValueError):
    """A frame that is not valid openpi msgpack-numpy (said in one line)."""


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray | np.generic):
        if obj.dtype.kind in _REFUSED_KINDS:
            raise WireError(f"cannot send a numpy array of dtype {obj.dtype} (object, void "
                            "and complex arrays are refused: no pickle)")
        if isinstance(obj, np.ndarray):
            return {_ND: True, b"data": np.ascontiguousarray(obj).tobytes(),
                    b"dtype": obj.dtype.str, b"shape": list(obj.shape)}
        return {_NG: True, b"data": obj.item(), b"dtype": obj.dtype.str}
    if isinstance(obj, tuple):
        return list(obj)
    raise WireError(f"cannot send a value of type {type(obj).__name__}")


def _decode(obj: dict[Any, Any]) -> Any:
    if _ND in obj:
        dtype, shape, data = _fields(obj, "__ndarray__", (b"dtype", b"shape", b"data"))
        dt = _dtype(dtype)
        try:
            return np.frombuffer(data, dtype=dt).reshape([int(n) for n in shape]).copy()
        except (TypeError, ValueError) as exc:
            raise WireError(f"bad __ndarray__ frame: {exc}") from None
    if _NG in obj:
        dtype, data = _fields(obj, "__npgeneric__", (b"dtype", b"data"))
        return _dtype(dtype).type(data)
    return obj


def _fields(obj: Mapping[Any, Any], kind: str, keys: tuple[bytes, ...]) -> list[Any]:
    missing = [k.decode() for k in keys if k not in obj]
    if missing:
        raise WireError(f"bad {kind} frame: no {', '.join(missing)}")
    return [obj[k] for k in keys]


def _dtype(text: Any) -> np.dtype[Any]:
    try:
        dt = np.dtype(text.decode() if isinstance(text, bytes) else str(text))
    except TypeError as exc:
        raise WireError(f"bad dtype {text!r}: {exc}") from None
    if dt.kind in _REFUSED_KINDS or dt.hasobject:
        raise WireError(f"refused dtype {dt} (no pickle)")
    return dt


def pack(obj: Any) -> bytes:
    """``obj`` (dicts, lists, str, numbers, numpy arrays and scalars) as one msgpack frame."""
    try:
        return msgpack.packb(obj, default=_encode, use_bin_type=True)
    except WireError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise WireError(f"cannot pack the message: {exc}") from None


def unpack(frame: bytes) -> Any:
    """One msgpack frame back to Python values (arrays as numpy arrays)."""
    try:
        return msgpack.unpackb(frame, object_hook=_decode, raw=False, strict_map_key=False)
    except WireError:
        raise
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError,
            msgpack.StackError) as exc:
        raise WireError(f"not a msgpack frame: {exc}") from None


def is_control(request: Any) -> bool:
    return isinstance(request, Mapping) and CTRL_KEY in request


def control(kind: str, **fields: Any) -> dict[str, Any]:
    """A control frame, e.g. ``control(EPISODE_START, __episode_id__=3)``."""
    return {CTRL_KEY: kind, **fields}


def auth_header(api_key: str) -> dict[str, str]:
    """The header a client sends its key in (openpi-client's form)."""
    return {"Authorization": f"Api-Key {api_key}"}


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The API key a client presented: ``Authorization: Api-Key K`` or ``Api-Key: K``."""
    auth = headers.get("Authorization")
    if auth:
        scheme, _, key = auth.strip().partition(" ")
        if scheme.lower() in ("api-key", "apikey", "bearer") and key.strip():
            return key.strip()
    key = headers.get("Api-Key")
    return key.strip() if key and key.strip() else None


def error_line(text: str) -> str:
    """The line of a server's error text worth showing: its first, or, for a Python
    traceback (openpi's servers send one), its last non-empty line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return "(empty error message)"
    return lines[-1] if lines[0].startswith("Traceback") else lines[0]


def get_path(tree: Mapping[str, Any], path: str) -> Any:
    """``tree["a"]["b"]`` for ``path`` ``"a/b"``; KeyError naming the missing key."""
    node: Any = tree
    for i, part in enumerate(path.split("/")):
        if not isinstance(node, Mapping) or part not in node:
            have = sorted(map(str, node)) if isinstance(node, Mapping) else type(node).__name__
            where = "/".join(path.split("/")[:i + 1])
            raise KeyError(f"no key {where!r} (has {have})")
        node = node[part]
    return node


def set_path(tree: dict[str, Any], path: str, value: Any) -> None:
    """``tree["a"]["b"] = value`` for ``path`` ``"a/b"``, making the inner dicts."""
    *parents, last = path.split("/")
    node = tree
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
