"""PngWriter: encodes an episode's plain (pixel) frames as PNGs on a background thread.

PNG encoding costs ~0.3-0.7 ms a frame; done here, it overlaps with the episode instead
of lengthening its steps. The queue is bounded, so a writer that falls behind slows the
episode down rather than holding an unbounded number of frames in memory. ``close``
waits until every queued PNG is on disk. A process killed before that loses the PNGs
still queued (at most ``max_pending``): their log lines refer to files that do not
exist, which the replay viewer shows as "no frame".
"""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

log = logging.getLogger(__name__)

MAX_PENDING = 8


class PngWriter:
    """One background thread writing ``(path, pixels)`` as PNGs in order."""

    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        self._queue: queue.Queue[tuple[Path, np.ndarray] | None] = queue.Queue(max_pending)
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._run, name="png-writer", daemon=True)
        self._thread.start()

    def put(self, path: Path, pixels: Any) -> None:
        """Queue a copy of ``pixels`` (the caller may reuse its buffer); blocks when full."""
        if self._thread is None:
            raise RuntimeError("PngWriter is closed")
        self._queue.put((path, np.array(pixels, dtype=np.uint8, copy=True)))

    def close(self) -> None:
        """Write everything queued, then stop the thread."""
        if self._thread is None:
            return
        self._queue.put(None)
        self._thread.join()
        self._thread = None  # type: ignore[assignment]

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            path, pixels = item
            try:
                # compress_level=1: frames are many and small; speed matters more than bytes.
                Image.fromarray(pixels).save(path, compress_level=1)
            except Exception as exc:  # a frame is an artefact: the episode goes on
                self.errors.append(f"{path.name}: {exc!r}")
                log.warning("could not write frame %s: %r", path, exc)
