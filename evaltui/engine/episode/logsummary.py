"""Turn node inputs and outputs into small JSON values for log.jsonl (DESIGN §2).

Arrays become ``{"$array": {shape, dtype, min, max}}`` (tiny ones are kept whole),
:class:`~evaltui.engine.nodes.Frame` and :class:`~evaltui.engine.episode.tiles.TiledFrame` values
are handed to ``save_frame``, which stores them and returns their stand-in
(``{"$frame": "frames.bin", "at": ...}`` or ``{"$frame": "assets/...png"}``), long
strings and lists are cut, and objects that are not data (a simulator handle) become
``{"$object": "module.Class"}``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from evaltui.engine.episode.tiles import TiledFrame
from evaltui.engine.nodes import Frame

MAX_STR = 2000
MAX_LIST = 64
SMALL_ARRAY = 16
MAX_DEPTH = 6

SaveFrame = Callable[[Frame | TiledFrame], dict[str, Any]]


def summarise(value: Any, save_frame: SaveFrame | None = None, depth: int = 0) -> Any:
    """A JSON-serialisable stand-in for ``value`` that is bounded in size."""
    # Every log record goes through here (~10 a step): the common exact types take one
    # dict lookup instead of the isinstance chain below (same result).
    kind = _EXACT.get(type(value))
    if kind is _SCALAR:
        return value
    if kind is dict and depth < MAX_DEPTH:
        return {str(k): summarise(v, save_frame, depth + 1) for k, v in value.items()}
    if kind is np.ndarray:
        if value.size <= SMALL_ARRAY and value.dtype.kind in "biuf":
            return value.tolist()
        return {"$array": _array_stats(value)}
    if kind is str and len(value) <= MAX_STR:
        return value
    if kind is _OBJECT:
        return {"$object": _type_name(value)}
    return _summarise(value, save_frame, depth)


def _summarise(value: Any, save_frame: SaveFrame | None, depth: int) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value if len(value) <= MAX_STR else value[:MAX_STR] + f"…(+{len(value) - MAX_STR})"
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, TiledFrame):  # before arrays: its pixels are never assembled here
        return {"$frame": None, "shape": list(value.shape)} if save_frame is None \
            else save_frame(value)
    if isinstance(value, Frame):
        return {"$frame": None, "shape": list(np.shape(value.pixels))} if save_frame is None \
            else save_frame(value)
    if isinstance(value, np.ndarray):
        if value.size <= SMALL_ARRAY and value.dtype.kind in "biuf":
            return value.tolist()
        return {"$array": _array_stats(value)}
    if depth >= MAX_DEPTH:
        return {"$object": _type_name(value)}
    if isinstance(value, Mapping):
        return {str(k): summarise(v, save_frame, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [summarise(v, save_frame, depth + 1) for v in value[:MAX_LIST]]
        if len(value) > MAX_LIST:
            items.append({"$more": len(value) - MAX_LIST})
        return items
    cls = type(value)
    if all("__class__" not in vars(k) for k in cls.__mro__[:-1]):
        # Not data (a simulator handle, sent every step): its type says so next time.
        # (Not for a type whose instances may claim another class to isinstance.)
        _EXACT[cls] = _OBJECT
    return {"$object": _type_name(value)}


_SCALAR, _OBJECT = object(), object()
_EXACT: dict[type, Any] = {type(None): _SCALAR, bool: _SCALAR, int: _SCALAR, float: _SCALAR,
                           str: str, dict: dict, np.ndarray: np.ndarray}
"""Exact types (not subclasses, which may override anything) and how they summarise;
types found to be no data (``$object``) are added as they are met."""


def _array_stats(arr: np.ndarray) -> dict[str, Any]:
    stats: dict[str, Any] = {"shape": list(arr.shape), "dtype": _dtype_name(arr.dtype)}
    if arr.size and arr.dtype.kind in "biuf":
        # What arr.min()/max() compute, without their Python-level wrapper.
        stats["min"] = np.minimum.reduce(arr, axis=None).item()
        stats["max"] = np.maximum.reduce(arr, axis=None).item()
    return stats


@lru_cache(maxsize=256)
def _dtype_name(dtype: np.dtype) -> str:
    return str(dtype)


def _type_name(value: Any) -> str:
    cls = type(value)
    return f"{cls.__module__}.{cls.__qualname__}"
