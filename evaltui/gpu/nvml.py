"""``pynvml`` (from nvidia-ml-py), imported once for every reader of real GPUs.

The PyPI ``pynvml`` package is now a shim around nvidia-ml-py that warns (FutureWarning) on
import; whichever one is installed, importing it here keeps that warning out of every
process (tests run with warnings as errors). Importing loads no library: NVML itself is
opened by ``nvmlInit``, which each reader calls (and which fails without a driver).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import pynvml

__all__ = ["nvml_ask", "pynvml"]

T = TypeVar("T")


def nvml_ask(question: Callable[[Any], T], default: T) -> T:
    """``question(pynvml)`` between ``nvmlInit`` and ``nvmlShutdown``; ``default`` without
    the library or a driver, or where the driver cannot answer (a bad state, a device it
    does not know)."""
    try:
        pynvml.nvmlInit()
    except Exception:  # no library, no driver
        return default
    try:
        return question(pynvml)
    except Exception:  # a driver in a bad state, a device it does not know
        return default
    finally:
        # shutting down a half-initialised NVML: nothing left to free
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
