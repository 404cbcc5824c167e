"""``pynvml`` (from nvidia-ml-py), imported once for every reader of real GPUs.

The PyPI ``pynvml`` package is now a shim around nvidia-ml-py that warns (FutureWarning) on
import; whichever one is installed, importing it here keeps that warning out of every
process (tests run with warnings as errors). Importing loads no library: NVML itself is
opened by ``nvmlInit``, which each reader calls (and which fails without a driver).
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import pynvml

__all__ = ["pynvml"]
