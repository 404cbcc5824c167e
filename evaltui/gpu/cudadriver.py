"""Hold real device memory through the CUDA driver API, loaded with ctypes (no torch, no toolkit).

Only ``libcuda.so.1`` (installed with the NVIDIA driver) is needed. The calls and their C
signatures, as the CUDA Driver API reference gives them::

    CUresult cuInit(unsigned int Flags)                         Flags must be 0
    CUresult cuDeviceGet(CUdevice *device, int ordinal)
    CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
    CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)         (CUDA 11+)
    CUresult cuCtxSetCurrent(CUcontext ctx)
    CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)  0 bytes: INVALID_VALUE
    CUresult cuMemFree_v2(CUdeviceptr dptr)
    CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
    CUresult cuGetErrorName(CUresult error, const char **pStr)  unknown code: INVALID_VALUE,
    CUresult cuGetErrorString(CUresult error, const char **pStr)  and *pStr = NULL

``CUresult`` is an enum (an int), ``CUdevice`` an int, ``CUcontext`` an opaque pointer and
``CUdeviceptr`` an ``unsigned long long`` on 64-bit hosts (the ``_v2`` entry points).

The device's *primary* context is used rather than ``cuCtxCreate``: it is the context the
CUDA runtime (and so torch) uses, which makes this process look to NVML like a model
process, and its entry points kept their signatures while ``cuCtxCreate`` gained new
ones (``_v3``, and ``_v4`` with CUctxCreateParams in CUDA 13).

Importing this module loads nothing: the library is opened, and CUDA initialised, only
when a :class:`DeviceMemory` is made. A process that imports a nodeset module and then
forks (the run's worker zygote) stays fork-safe; CUDA does not survive a fork.

Every CUresult is checked: a failure raises :class:`CudaError` with the call, the enum
name and the driver's description (``cuMemAlloc_v2(1024 MiB) failed:
CUDA_ERROR_OUT_OF_MEMORY (2): out of memory``). A missing library or function raises
:class:`CudaUnavailable` naming the library.
"""

from __future__ import annotations

import ctypes
import threading
from ctypes import POINTER, byref, c_char_p, c_int, c_size_t, c_uint, c_uint64, c_void_p
from typing import Any

LIBCUDA = "libcuda.so.1"
"""The driver library's soname (the unversioned ``libcuda.so`` ships only with the toolkit)."""
MIB = 1 << 20
CUDA_SUCCESS = 0
CUDA_ERROR_DEINITIALIZED = 4
"""The driver is shutting down (interpreter exit): what was allocated is gone with it."""

_CUresult = c_int
_CUdevice = c_int
_CUcontext = c_void_p
_CUdeviceptr = c_uint64

SIGNATURES: dict[str, list[Any]] = {
    "cuGetErrorName": [_CUresult, POINTER(c_char_p)],
    "cuGetErrorString": [_CUresult, POINTER(c_char_p)],
    "cuInit": [c_uint],
    "cuDeviceGet": [POINTER(_CUdevice), c_int],
    "cuDevicePrimaryCtxRetain": [POINTER(_CUcontext), _CUdevice],
    "cuDevicePrimaryCtxRelease_v2": [_CUdevice],
    "cuCtxSetCurrent": [_CUcontext],
    "cuMemAlloc_v2": [POINTER(_CUdeviceptr), c_size_t],
    "cuMemFree_v2": [_CUdeviceptr],
    "cuMemGetInfo_v2": [POINTER(c_size_t), POINTER(c_size_t)],
}
"""Argument types of every function used; each returns a CUresult."""


class CudaUnavailable(RuntimeError):
    """The CUDA driver library, or a function of it, cannot be loaded."""


class CudaError(RuntimeError):
    """A driver call returned something other than CUDA_SUCCESS."""

    def __init__(self, call: str, code: int, name: str | None, description: str | None
                 ) -> None:
        self.call, self.code = call, code
        self.name = name or f"unknown CUresult {code}"
        self.description = description or "the driver has no description for this code"
        super().__init__(f"{call} failed: {self.name} ({code}): {self.description}")


class CudaDriver:
    """The driver library's functions with their C signatures; every result checked.

    ``lib`` is anything with the functions of SIGNATURES as attributes, by default
    ``ctypes.CDLL(path)``; a test without libcuda passes a table of ctypes callbacks,
    which then go through exactly the calls and conversions below.
    """

    def __init__(self, lib: Any | None = None, path: str = LIBCUDA) -> None:
        self.path = path
        if lib is None:
            try:
                lib = ctypes.CDLL(path)
            except OSError as exc:
                raise CudaUnavailable(
                    f"cannot load the CUDA driver library {path}: {exc} (is the NVIDIA "
                    "driver installed, and its library on the loader path?)") from exc
        self._fns: dict[str, Any] = {}
        for name, argtypes in SIGNATURES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise CudaUnavailable(
                    f"{path} has no {name}: not the CUDA driver library, or a driver older "
                    "than CUDA 11") from None
            fn.argtypes, fn.restype = argtypes, _CUresult
            self._fns[name] = fn

    def call(self, name: str, *args: Any, what: str | None = None) -> None:
        """Call ``name``; raise CudaError (named ``what``, else ``name``) unless it succeeds."""
        code = int(self._fns[name](*args))
        if code != CUDA_SUCCESS:
            raise self.error(what or name, code)

    def error(self, call: str, code: int) -> CudaError:
        """The CudaError for ``code``, described by the driver itself."""
        return CudaError(call, code, self._describe("cuGetErrorName", code),
                         self._describe("cuGetErrorString", code))

    def _describe(self, fn: str, code: int) -> str | None:
        text = c_char_p()
        if int(self._fns[fn](code, byref(text))) != CUDA_SUCCESS or not text.value:
            return None  # an unknown code: the caller says so
        return text.value.decode(errors="replace")


class DeviceMemory:
    """Device memory held on one GPU through its primary context, freed on :meth:`close`.

    ``ordinal`` counts the devices CUDA sees: with ``CUDA_VISIBLE_DEVICES=3`` (as the
    scheduler sets for a run it put on GPU 3), ordinal 0 is that GPU. Usable from any
    thread: each call makes the context current first.
    """

    def __init__(self, ordinal: int = 0, driver: CudaDriver | None = None) -> None:
        self.driver = driver if driver is not None else CudaDriver()
        self.ordinal = ordinal
        self._lock = threading.Lock()
        self._blocks: list[tuple[int, int]] = []  # (device pointer, MiB)
        d = self.driver
        d.call("cuInit", 0)
        device = _CUdevice()
        d.call("cuDeviceGet", byref(device), ordinal, what=f"cuDeviceGet(ordinal {ordinal})")
        self._device = device.value
        context = _CUcontext()
        d.call("cuDevicePrimaryCtxRetain", byref(context), self._device)
        self._context: _CUcontext | None = context
        try:
            d.call("cuCtxSetCurrent", context)
        except CudaError:
            d.call("cuDevicePrimaryCtxRelease_v2", self._device)
            self._context = None
            raise

    @property
    def held_mb(self) -> int:
        """MiB allocated through this object and not freed yet."""
        with self._lock:
            return sum(mb for _, mb in self._blocks)

    def alloc(self, mb: int) -> int:
        """Allocate ``mb`` MiB more (one block); returns the MiB held in all."""
        if mb <= 0:
            raise ValueError(f"allocate at least 1 MiB (got {mb})")
        with self._lock:
            self._current()
            pointer = _CUdeviceptr()
            self.driver.call("cuMemAlloc_v2", byref(pointer), mb * MIB,
                             what=f"cuMemAlloc_v2({mb} MiB)")
            self._blocks.append((pointer.value, mb))
            return sum(b for _, b in self._blocks)

    def free_all(self) -> None:
        """Free every block (the context stays: its own memory is still in use)."""
        with self._lock:
            self._free_blocks()

    def mem_info(self) -> tuple[int, int]:
        """``(free, total)`` MiB of the device as the driver sees it (cuMemGetInfo_v2)."""
        with self._lock:
            self._current()
            free, total = c_size_t(), c_size_t()
            self.driver.call("cuMemGetInfo_v2", byref(free), byref(total))
            return free.value // MIB, total.value // MIB

    def close(self) -> None:
        """Free every block and release the primary context (it is destroyed with the last
        reference, and its memory with it). Idempotent."""
        with self._lock:
            if self._context is None:
                return
            try:
                self._free_blocks()
            finally:
                self._context = None
                try:
                    self.driver.call("cuDevicePrimaryCtxRelease_v2", self._device)
                except CudaError as exc:
                    if exc.code != CUDA_ERROR_DEINITIALIZED:
                        raise

    def __enter__(self) -> DeviceMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _current(self) -> None:
        if self._context is None:
            raise RuntimeError("this DeviceMemory is closed")
        self.driver.call("cuCtxSetCurrent", self._context)

    def _free_blocks(self) -> None:
        """Free all blocks, each even if another fails; raise the first failure after."""
        if not self._blocks:
            return
        first: CudaError | None = None
        try:
            self._current()
        except CudaError as exc:
            first = exc
        for pointer, mb in self._blocks:
            try:
                self.driver.call("cuMemFree_v2", _CUdeviceptr(pointer),
                                 what=f"cuMemFree_v2({mb} MiB)")
            except CudaError as exc:
                if exc.code != CUDA_ERROR_DEINITIALIZED and first is None:
                    first = exc
        self._blocks.clear()
        if first is not None and first.code != CUDA_ERROR_DEINITIALIZED:
            raise first


def hold(mb: int, ordinal: int = 0) -> DeviceMemory:
    """A DeviceMemory on device ``ordinal`` holding ``mb`` MiB (0: just the context)."""
    memory = DeviceMemory(ordinal)
    try:
        if mb:
            memory.alloc(mb)
    except BaseException:
        memory.close()
        raise
    return memory
