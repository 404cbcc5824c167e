"""``python -m evaltui.gpu.hold [--device N]``: a process that holds device memory on command.

It opens the device's primary context, then reads commands, one per line, on stdin:

    alloc MB    allocate MB MiB more
    free        free everything allocated (the context stays)

and answers each (and the start) with one JSON line on stdout: ``{"pid", "held_mb",
"driver_free_mb", "driver_total_mb"}``, or ``{"error": "..."}``. End of input frees
everything and exits. Tests point NVML at its PID; on a new machine it is the quickest
way to see that the driver, NVML and this process agree.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from evaltui.gpu.cudadriver import CudaError, CudaUnavailable, DeviceMemory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaltui.gpu.hold",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", type=int, default=0,
                        help="CUDA device ordinal (after CUDA_VISIBLE_DEVICES; default 0)")
    args = parser.parse_args(argv)
    try:
        memory = DeviceMemory(args.device)
    except (CudaError, CudaUnavailable) as exc:
        _say({"error": str(exc)})
        return 1
    with memory:
        _say(_state(memory))
        for line in sys.stdin:
            words = line.split()
            try:
                if words[:1] == ["alloc"] and len(words) == 2:
                    memory.alloc(int(words[1]))
                elif words == ["free"]:
                    memory.free_all()
                else:
                    _say({"error": f"unknown command {line.strip()!r}: alloc MB | free"})
                    continue
            except (CudaError, ValueError) as exc:
                _say({"error": str(exc)})
                continue
            _say(_state(memory))
    return 0


def _state(memory: DeviceMemory) -> dict[str, Any]:
    free, total = memory.mem_info()
    return {"pid": os.getpid(), "held_mb": memory.held_mb, "driver_free_mb": free,
            "driver_total_mb": total}


def _say(message: dict[str, Any]) -> None:
    print(json.dumps(message), flush=True)


if __name__ == "__main__":
    sys.exit(main())
