"""Frames of an episode's ``video.mp4`` (:mod:`evaltui.engine.episode.videowriter`) by index.

The replay viewer, the GIF export and the report ask for frames one at a time, mostly in
order; a video decodes front to back, so the whole file is decoded once and kept (the
last two videos, keyed by their size and mtime: a video still being written is read
again when it grows). A fragmented MP4 cut short by a kill decodes up to its last whole
fragment. PyAV is imported on the first video read only (``evaltui[metaworld]``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

VIDEO_SUFFIXES = frozenset({".mp4", ".webm"})


def is_video(path: Path) -> bool:
    return path.suffix.lower() in VIDEO_SUFFIXES


def video_frame(path: Path, at: int) -> np.ndarray:
    """Frame ``at`` (0-based) of the video at ``path`` as (H, W, 3) uint8; ValueError if
    the video has no such frame, OSError if it cannot be read."""
    stat = path.stat()
    frames = _decoded(str(path), stat.st_size, stat.st_mtime_ns)
    if not 0 <= at < len(frames):
        raise ValueError(f"{path.name} has {len(frames)} frames, not frame {at}")
    return frames[at]


@lru_cache(maxsize=2)
def _decoded(path: str, _size: int, _mtime_ns: int) -> tuple[np.ndarray, ...]:
    try:
        # optional: av (PyAV, the metaworld extra): only episodes with video frames need it
        import av
    except ImportError as exc:
        raise OSError(f"reading {Path(path).name} needs PyAV: pip install av ({exc})") from None
    frames: list[np.ndarray] = []
    try:
        with av.open(path) as container:
            for frame in container.decode(video=0):
                frames.append(frame.to_ndarray(format="rgb24"))
    except av.error.FFmpegError as exc:
        if not frames:
            raise OSError(f"{Path(path).name}: not a readable video ({exc})") from None
    return tuple(frames)
