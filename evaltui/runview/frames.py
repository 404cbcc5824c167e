"""FrameRef: one logged frame of an episode dir, whichever way the logger stored it.

log.jsonl stands a frame in by ``{"$frame": "assets/<name>.png", "shape": ...}`` (a plain
frame, one PNG) or ``{"$frame": "frames.bin", "at": offset, "shape": ...}`` (a
tiled frame, :mod:`evaltui.rundir.framefile`) or ``{"$frame": "video.mp4", "at": index, ...}``
(a frame of the episode's video, :mod:`evaltui.runview.videoframes`). A reference is
resolved only inside the episode dir: a copied dir comes from someone else, so one
pointing out of it is ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from evaltui.rundir.framefile import read_frame
from evaltui.runview.videoframes import is_video, video_frame

_MAX_DEPTH = 6
_MAX_ITEMS = 64


@dataclass(frozen=True)
class FrameRef:
    """Where one frame is: an image file, or the record at ``at`` of a frames file."""

    path: Path
    step: int
    """The step of the log record that holds the frame."""
    at: int | None = None

    @property
    def name(self) -> str:
        return self.path.name if self.at is None else f"{self.path.name}@{self.at}"

    def stamp(self) -> int:
        """Changes when the file is rewritten (for caches); raises OSError if it is gone."""
        return self.path.stat().st_mtime_ns

    def image(self) -> Image.Image:
        """The frame as an RGB image; OSError or ValueError if it cannot be read."""
        if self.at is not None and is_video(self.path):
            return Image.fromarray(video_frame(self.path, self.at))
        if self.at is None:
            with Image.open(self.path) as img:
                return img.convert("RGB")
        return Image.fromarray(read_frame(self.path, self.at))

    def pixels(self) -> np.ndarray:
        """The frame as an (H, W, 3) uint8 array."""
        if self.at is not None and is_video(self.path):
            return video_frame(self.path, self.at)
        if self.at is not None:
            return read_frame(self.path, self.at)
        return np.asarray(self.image())


def frame_values(value: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    """Every ``{"$frame": str, ...}`` stand-in inside a logged value, in order."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, dict):
        if isinstance(value.get("$frame"), str):
            yield value
            return
        for item in value.values():
            yield from frame_values(item, depth + 1)
    elif isinstance(value, list):
        for item in value[:_MAX_ITEMS]:
            yield from frame_values(item, depth + 1)


def resolve(ep_dir: Path, stand_in: dict[str, Any], step: int) -> FrameRef | None:
    """The FrameRef of a stand-in, or None if it points out of ``ep_dir`` or at nothing."""
    at = stand_in.get("at")
    if at is not None and (isinstance(at, bool) or not isinstance(at, int) or at < 0):
        return None
    path = (ep_dir / str(stand_in["$frame"])).resolve()
    if not path.is_relative_to(ep_dir.resolve()) or not path.is_file():
        return None
    return FrameRef(path, step, at)


def record_frames(ep_dir: Path, record: dict[str, Any]) -> list[FrameRef]:
    """The frames a log record's outputs hold, resolvable ones only, in order."""
    step = record.get("step")
    step = step if isinstance(step, int) and not isinstance(step, bool) else 0
    refs = (resolve(ep_dir, v, step) for v in frame_values(record.get("outputs")))
    return [ref for ref in refs if ref is not None]
