"""The CUDA driver wrapper where there is no libcuda: its load errors for real, and its
CUresult checks through a driver table of ctypes callbacks (the real library is absent;
the wrapper calls the table through ctypes exactly as it calls libcuda)."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gpuhelpers import libcuda_loads

from evaltui.gpu.cudadriver import (
    LIBCUDA,
    MIB,
    SIGNATURES,
    CudaDriver,
    CudaError,
    CudaUnavailable,
    DeviceMemory,
)

# The codes, names and descriptions libcuda gives (cuda.h, cuGetErrorString).
ERRORS: dict[int, tuple[bytes, bytes]] = {
    0: (b"CUDA_SUCCESS", b"no error"),
    1: (b"CUDA_ERROR_INVALID_VALUE", b"invalid argument"),
    2: (b"CUDA_ERROR_OUT_OF_MEMORY", b"out of memory"),
    3: (b"CUDA_ERROR_NOT_INITIALIZED", b"initialization error"),
    100: (b"CUDA_ERROR_NO_DEVICE", b"no CUDA-capable device is detected"),
    101: (b"CUDA_ERROR_INVALID_DEVICE", b"invalid device ordinal"),
    201: (b"CUDA_ERROR_INVALID_CONTEXT", b"invalid device context"),
}


class TableDriver:
    """libcuda's entry points as ctypes callbacks over one pretend device of ``total_mb``,
    following the driver API reference's rules for each call."""

    def __init__(self, total_mb: int = 1024, init_result: int = 0) -> None:
        self.total, self.init_result = total_mb * MIB, init_result
        self.initialized = False
        self.retained = 0
        self.current: int | None = None
        self.blocks: dict[int, int] = {}
        self.next_pointer = 0x7F00_0000_0000
        self.calls: list[str] = []
        for name, argtypes in SIGNATURES.items():
            impl = getattr(self, f"_{name}")
            setattr(self, name, ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(
                self._logged(name, impl)))

    def _logged(self, name: str, impl: Any) -> Any:
        def call(*args: Any) -> int:
            self.calls.append(name)
            return impl(*args)
        return call

    def _describe(self, code: int, out: Any, which: int) -> int:
        if code not in ERRORS:
            out[0] = None
            return 1
        out[0] = ERRORS[code][which]
        return 0

    def _cuGetErrorName(self, code: int, out: Any) -> int:
        return self._describe(code, out, 0)

    def _cuGetErrorString(self, code: int, out: Any) -> int:
        return self._describe(code, out, 1)

    def _cuInit(self, flags: int) -> int:
        if flags != 0:
            return 1
        self.initialized = self.init_result == 0
        return self.init_result

    def _cuDeviceGet(self, device: Any, ordinal: int) -> int:
        if not self.initialized:
            return 3
        if ordinal != 0:
            return 101
        device[0] = 0
        return 0

    def _cuDevicePrimaryCtxRetain(self, context: Any, device: int) -> int:
        self.retained += 1
        context[0] = 0xC0DE
        return 0

    def _cuDevicePrimaryCtxRelease_v2(self, device: int) -> int:
        if self.retained == 0:
            return 201
        self.retained -= 1
        return 0

    def _cuCtxSetCurrent(self, context: int | None) -> int:
        self.current = context
        return 0

    def _cuMemAlloc_v2(self, pointer: Any, size: int) -> int:
        if size == 0:
            return 1
        if self.current is None or self.retained == 0:
            return 201
        if sum(self.blocks.values()) + size > self.total:
            return 2
        self.next_pointer += size
        self.blocks[self.next_pointer] = size
        pointer[0] = self.next_pointer
        return 0

    def _cuMemFree_v2(self, pointer: int) -> int:
        return 0 if self.blocks.pop(pointer, None) is not None else 1

    def _cuMemGetInfo_v2(self, free: Any, total: Any) -> int:
        free[0] = self.total - sum(self.blocks.values())
        total[0] = self.total
        return 0


def test_a_missing_driver_library_is_named(tmp_path: Path) -> None:
    missing = tmp_path / LIBCUDA
    with pytest.raises(CudaUnavailable) as err:
        CudaDriver(path=str(missing))
    assert str(err.value).startswith(f"cannot load the CUDA driver library {missing}: ")
    assert "No such file" in str(err.value)


def test_a_library_that_is_not_the_driver_is_named() -> None:
    with pytest.raises(CudaUnavailable, match=r"^libc\.so\.6 has no cuGetErrorName: not the "
                       "CUDA driver library"):
        CudaDriver(path="libc.so.6")


@pytest.mark.skipif(libcuda_loads(), reason=f"{LIBCUDA} loads here: the gpu tests use it")
def test_the_holder_process_says_why_it_cannot_hold_memory() -> None:
    proc = subprocess.run([sys.executable, "-m", "evaltui.gpu.hold"], input="alloc 1\n",
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    (answer,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert answer["error"].startswith(f"cannot load the CUDA driver library {LIBCUDA}: ")


def test_memory_is_held_until_freed_and_the_context_released_on_close() -> None:
    table = TableDriver(total_mb=1024)
    memory = DeviceMemory(0, CudaDriver(lib=table))
    assert (table.initialized, table.retained, table.current) == (True, 1, 0xC0DE)
    assert memory.alloc(300) == 300 and memory.alloc(200) == 500
    assert sorted(table.blocks.values()) == [200 * MIB, 300 * MIB]
    assert memory.mem_info() == (524, 1024) and memory.held_mb == 500
    memory.free_all()
    assert table.blocks == {} and memory.held_mb == 0 and table.retained == 1
    memory.alloc(100)
    memory.close()
    assert table.blocks == {} and table.retained == 0
    memory.close()  # idempotent: the context is released once
    assert table.calls.count("cuDevicePrimaryCtxRelease_v2") == 1
    with pytest.raises(RuntimeError, match="closed"):
        memory.alloc(1)


def test_out_of_memory_is_reported_by_call_name_and_description() -> None:
    table = TableDriver(total_mb=1024)
    with DeviceMemory(0, CudaDriver(lib=table)) as memory:
        memory.alloc(1000)
        with pytest.raises(CudaError) as err:
            memory.alloc(100)
        assert str(err.value) == ("cuMemAlloc_v2(100 MiB) failed: CUDA_ERROR_OUT_OF_MEMORY "
                                  "(2): out of memory")
        assert (err.value.code, err.value.name) == (2, "CUDA_ERROR_OUT_OF_MEMORY")
        assert memory.held_mb == 1000  # the failed block is not counted
        with pytest.raises(ValueError):
            memory.alloc(0)  # the driver would refuse 0 bytes as INVALID_VALUE
    assert table.blocks == {} and table.retained == 0


def test_init_and_device_errors_release_nothing_they_did_not_take() -> None:
    no_device = TableDriver(init_result=100)
    with pytest.raises(CudaError, match=r"^cuInit failed: CUDA_ERROR_NO_DEVICE \(100\): no "
                       "CUDA-capable device is detected$"):
        DeviceMemory(0, CudaDriver(lib=no_device))
    assert no_device.retained == 0
    table = TableDriver()
    with pytest.raises(CudaError, match=r"^cuDeviceGet\(ordinal 1\) failed: "
                       r"CUDA_ERROR_INVALID_DEVICE \(101\): invalid device ordinal$"):
        DeviceMemory(1, CudaDriver(lib=table))
    assert table.retained == 0


def test_an_unknown_result_code_still_gives_a_clear_error() -> None:
    driver = CudaDriver(lib=TableDriver())
    err = driver.error("cuMemFree_v2", 999)
    assert str(err) == ("cuMemFree_v2 failed: unknown CUresult 999 (999): the driver has no "
                        "description for this code")
