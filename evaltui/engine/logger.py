"""ExecutionLogger: one episode's ``log.jsonl``, ``frames.bin`` and ``assets/`` (DESIGN §2).

Each episode has its own logger writing only into its own ``ep{NNNN}/`` dir, so logs are
never interleaved and a copied episode dir replays standalone. Records are appended one
JSON object per line and flushed at each step's end, so a reader sees whole steps.

Frames: a :class:`~evaltui.engine.tiles.TiledFrame` (the BabyAI env's) is appended to
``frames.bin`` as tile ids, synchronously and before the log line that refers to it
(:mod:`evaltui.framefile`); no image is encoded during the run. A plain
:class:`~evaltui.engine.nodes.Frame` becomes ``assets/step..._node_N.png``, encoded on a
background thread (:mod:`evaltui.engine.pngwriter`) that ``close`` waits for, so the
episode's frames are all on disk before the worker reports the episode (and the run
writes its episode.json). ``frames.bin`` and ``assets/`` are created at their first
frame: a new file costs ~0.3-0.6 ms on an ext4 VM, a real share of a short episode.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson

from evaltui.engine.logsummary import summarise
from evaltui.engine.nodes import Frame
from evaltui.engine.pngwriter import PngWriter
from evaltui.engine.tiles import TiledFrame
from evaltui.framefile import FrameFileWriter


class ExecutionLogger:
    """Appends firing records to ``ep_dir/log.jsonl``; tiled frames go to ``frames.bin``,
    plain ones to PNGs under ``assets/``."""

    def __init__(self, ep_dir: Path) -> None:
        self.ep_dir = ep_dir
        self.assets = ep_dir / "assets"
        ep_dir.mkdir(parents=True, exist_ok=True)
        # Truncate: a retried episode starts its log afresh (the attempt count is kept
        # in episode.json).
        self._fh: BinaryIO | None = open(ep_dir / "log.jsonl", "wb")  # noqa: SIM115
        self._tiled = FrameFileWriter(ep_dir)
        self._png: PngWriter | None = None
        self._frames = 0
        self._step = 0
        self._node = ""

    def record(
        self,
        event: str,
        *,
        step: int,
        node: str | None = None,
        nodeset: str | None = None,
        dur_ms: float | None = None,
        inputs: Any = None,
        outputs: Any = None,
        error: str | None = None,
    ) -> None:
        if self._fh is None:
            raise RuntimeError(f"logger of {self.ep_dir} is closed")
        self._step, self._node = step, node or event
        rec = {
            "t": round(time.time(), 6),
            "step": step,
            "node": node,
            "nodeset": nodeset,
            "event": event,
            "dur_ms": None if dur_ms is None else round(dur_ms, 3),
            "inputs": summarise(inputs, self._save_frame),
            "outputs": summarise(outputs, self._save_frame),
            "error": error,
        }
        self._fh.write(orjson.dumps(rec, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()

    def close(self) -> None:
        """Wait for the frames still being encoded, then close every file."""
        if self._png is not None:
            self._png.close()
            self._png = None
        self._tiled.close()
        if self._fh is not None:
            self._fh.flush()
            self._fh.close()
            self._fh = None

    def _save_frame(self, frame: Frame | TiledFrame) -> dict[str, Any]:
        if isinstance(frame, TiledFrame):
            return self._tiled.write(frame)
        self._frames += 1
        name = f"step{self._step:05d}_{self._node}_{self._frames:05d}.png"
        if self._png is None:
            self.assets.mkdir(exist_ok=True)
            self._png = PngWriter()
        self._png.put(self.assets / name, frame.pixels)
        return {"$frame": f"assets/{name}", "shape": list(np.shape(frame.pixels))}

    def __enter__(self) -> ExecutionLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
