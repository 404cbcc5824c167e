"""An episode's frames as an animated GIF (``evaltui replay EP --export ep.gif``).

The frames are the PNGs under ``ep_dir/assets/`` that log.jsonl references as
``{"$frame": "assets/..."}`` in its records' outputs, in log order; a frame a node
received as input was already logged as the output of the node that made it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from PIL import Image

from evaltui.rundir import iter_log
from evaltui.runview.replay import LOG_FILENAME

_MAX_DEPTH = 6


class NoFramesError(ValueError):
    """The episode dir holds no frames to animate (or no log.jsonl)."""


def episode_frames(ep_dir: Path) -> list[Path]:
    """The frame files of an episode in log order (each once; missing files skipped)."""
    ep_dir = Path(ep_dir)
    log_path = ep_dir / LOG_FILENAME
    if not log_path.is_file():
        raise NoFramesError(f"{ep_dir} has no {LOG_FILENAME}")
    root = ep_dir.resolve()
    frames: list[Path] = []
    seen: set[Path] = set()
    for _offset, record in iter_log(log_path):
        for ref in _frame_refs(record.get("outputs")):
            path = (ep_dir / ref).resolve()
            # A copied dir comes from someone else: never follow a reference out of it.
            if path in seen or not path.is_relative_to(root) or not path.is_file():
                continue
            seen.add(path)
            frames.append(path)
    return frames


def _frame_refs(value: Any, depth: int = 0) -> Iterator[str]:
    """Every ``{"$frame": path}`` reference inside a logged value, in order."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, dict):
        ref = value.get("$frame")
        if isinstance(ref, str):
            yield ref
            return
        for item in value.values():
            yield from _frame_refs(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _frame_refs(item, depth + 1)


def write_gif(frames: list[Path], out: Path, fps: float = 4.0) -> int:
    """Write ``frames`` to ``out`` as a looping GIF at ``fps``; return the frame count.

    Frames of another size than the first are scaled to it (a GIF has one canvas).
    """
    if not frames:
        raise NoFramesError("no frames to write")
    if not fps > 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    images = []
    for path in frames:
        with Image.open(path) as im:
            images.append(im.convert("RGB"))
    size = images[0].size
    images = [im if im.size == size else im.resize(size, Image.Resampling.NEAREST)
              for im in images]
    # GIF delays are in 10 ms units; round once so the whole animation keeps its rate.
    duration = max(10, round(1000 / fps / 10) * 10)
    out.parent.mkdir(parents=True, exist_ok=True)
    images[0].save(out, format="GIF", save_all=True, append_images=images[1:],
                   duration=duration, loop=0)
    return len(images)


def export_gif(ep_dir: Path, out: Path, fps: float = 4.0) -> int:
    """Write the frames of ``ep_dir`` to ``out``; NoFramesError if it has none."""
    frames = episode_frames(ep_dir)
    if not frames:
        raise NoFramesError(f"{ep_dir} has no frames (log.jsonl references none under "
                            "assets/; was the env's frame_stride 0?)")
    return write_gif(frames, out, fps)
