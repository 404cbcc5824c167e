"""ExecutionLogger: one episode's ``log.jsonl``, ``frames.bin`` and ``assets/`` (DESIGN §2).

Each episode has its own logger writing only into its own ``ep{NNNN}/`` dir, so logs are
never interleaved and a copied episode dir replays standalone. Records are appended one
JSON object per line; a step's records are written at its end, or together with the
next steps within :data:`~evaltui.engine.episode.logflush.FLUSH_INTERVAL_SEC` (50 ms) of it
(:mod:`evaltui.engine.episode.logflush`), so a reader sees whole steps, each soon after its end.

Frames: a :class:`~evaltui.engine.nodes.Frame` with ``video`` set goes into the episode's
``video.mp4`` (:mod:`evaltui.engine.episode.videowriter`); a
:class:`~evaltui.engine.episode.tiles.TiledFrame` (the BabyAI env's) is appended to
``frames.bin`` as tile ids, written with the log's batch of lines, just before them
(:mod:`evaltui.rundir.framefile`); no image is encoded during the run. A plain
:class:`~evaltui.engine.nodes.Frame` becomes ``assets/step..._node_N.png``, encoded on a
background thread (:mod:`evaltui.engine.episode.pngwriter`) that ``close`` waits for, so the
episode's frames are all on disk before the worker reports the episode (and the run
writes its episode.json). ``frames.bin`` is opened at the first frame and ``assets/``
created then: a new file costs ~0.15-0.6 ms on an ext4 VM, a real share of a short
episode, so the executor's recorder makes log.jsonl (and frames.bin, once the run has shown
it writes them) ahead of the episode, empty.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from evaltui.contract.records import ASSETS_DIRNAME, LOG_FILENAME
from evaltui.engine.episode.logflush import FLUSH_INTERVAL_SEC, StepWriter
from evaltui.engine.episode.logsummary import summarise
from evaltui.engine.episode.pngwriter import PngWriter
from evaltui.engine.episode.tiles import TiledFrame
from evaltui.engine.episode.videowriter import VIDEO_FILENAME, VideoWriter
from evaltui.engine.nodes import Frame
from evaltui.rundir.framefile import FrameFileWriter, open_fresh

_DUMPS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE


class ExecutionLogger:
    """Appends firing records to ``ep_dir/log.jsonl``; tiled frames go to ``frames.bin``,
    plain ones to PNGs under ``assets/``."""

    def __init__(self, ep_dir: Path, *, flush_interval_sec: float = FLUSH_INTERVAL_SEC) -> None:
        self.ep_dir = ep_dir
        self.assets = ep_dir / ASSETS_DIRNAME
        self._tiled = FrameFileWriter(ep_dir)
        self._log: StepWriter | None = StepWriter(_open_log(ep_dir), flush_interval_sec,
                                                  before_write=self._tiled.flush)
        self._png: PngWriter | None = None
        self._video: VideoWriter | None = None
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
        if self._log is None:
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
        self._log.append(orjson.dumps(rec, option=_DUMPS))

    def flush(self) -> None:
        """A step's end: its records are whole (written now or within the interval)."""
        if self._log is not None:
            self._log.end_step()

    def close(self) -> None:
        """Wait for the frames still being encoded, then close every file."""
        if self._png is not None:
            self._png.close()
            self._png = None
        if self._video is not None:
            self._video.close()
            self._video = None
        try:
            if self._log is not None:
                self._log.close()  # the frames first, then the lines
                self._log = None
        finally:
            self._tiled.close()

    def _save_frame(self, frame: Frame | TiledFrame) -> dict[str, Any]:
        if isinstance(frame, TiledFrame):
            return self._tiled.write(frame)
        if frame.video:
            if self._video is None:
                self._video = VideoWriter(self.ep_dir)
            if self._video.accepts(frame.pixels):  # else (odd size, new shape): a PNG
                at = self._video.put(frame.pixels)
                return {"$frame": VIDEO_FILENAME, "at": at,
                        "shape": list(np.shape(frame.pixels))}
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


def _open_log(ep_dir: Path) -> int:
    """A write fd of ``ep_dir/log.jsonl``, empty (an earlier attempt's log is truncated:
    the attempt count is kept in episode.json); usually the executor's recorder made it."""
    try:
        return open_fresh(ep_dir / LOG_FILENAME)
    except FileNotFoundError:
        ep_dir.mkdir(parents=True, exist_ok=True)
        return open_fresh(ep_dir / LOG_FILENAME)
