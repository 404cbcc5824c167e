"""An episode's frames as an animated GIF (``evaltui replay EP --export ep.gif``).

The frames are those log.jsonl references as ``{"$frame": ...}`` in its records'
outputs (PNGs under ``assets/``, or records of ``frames.bin``), in log order; a frame a
node received as input was already logged as the output of the node that made it. The
log is opened without following a symlink out of the ep dir (:mod:`evaltui.rundir.safeopen`);
frames resolve only inside it (:mod:`evaltui.runview.frames`).
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from evaltui.contract.records import LOG_FILENAME
from evaltui.rundir.logread import iter_log
from evaltui.rundir.safeopen import LeavesRoot, open_inside
from evaltui.runview.frames import FrameRef, record_frames


class NoFramesError(ValueError):
    """The episode dir holds no frames to animate (or no log.jsonl)."""


FORMATS_BY_SUFFIX = {".gif": "GIF", ".png": "PNG"}
"""What ``--export``'s suffix writes: a GIF, or an animated PNG (APNG)."""
AUTO_SCALE_PX = 256
"""Without ``--scale``, frames are scaled up (by a whole factor, nearest neighbour) until
their longer side is at least this: a GoToLocal frame is 64 px, a stamp on today's
screens."""


def animation_format(out: Path) -> str:
    """The image format ``out``'s suffix names; ValueError for any other suffix."""
    fmt = FORMATS_BY_SUFFIX.get(out.suffix.lower())
    if fmt is None:
        raise ValueError(f"{out}: unknown suffix {out.suffix or '(none)'!r}; give .gif or "
                         ".png (an animated PNG)")
    return fmt


def auto_scale(size: tuple[int, int]) -> int:
    """The whole factor that brings ``size``'s longer side to AUTO_SCALE_PX or more."""
    return max(1, -(-AUTO_SCALE_PX // max(1, max(size))))


def episode_frames(ep_dir: Path) -> list[FrameRef]:
    """The frames of an episode in log order (each once; missing or outside ones skipped)."""
    ep_dir = Path(ep_dir)
    try:
        log = open_inside(ep_dir, LOG_FILENAME)
    except LeavesRoot:
        raise NoFramesError(f"{ep_dir / LOG_FILENAME} is a symlink that leaves the episode "
                            "dir; not read") from None
    except OSError:
        raise NoFramesError(f"{ep_dir} has no {LOG_FILENAME}") from None
    frames: list[FrameRef] = []
    seen: set[tuple[Path, int | None]] = set()
    with log:
        for _offset, record in iter_log(log):
            for ref in record_frames(ep_dir, record):
                if (ref.path, ref.at) not in seen:
                    seen.add((ref.path, ref.at))
                    frames.append(ref)
    return frames


def write_gif(frames: list[FrameRef], out: Path, fps: float = 4.0, *,
              scale: int | None = 1) -> int:
    """Write ``frames`` to ``out`` as a looping animation at ``fps`` (GIF, or APNG for a
    .png), each frame ``scale`` times its size (None: :func:`auto_scale`); return the
    frame count. Frames of another size than the first are scaled to it (one canvas).
    ``out``'s dir must exist, or its parent (the last dir is made, as ``mkdir`` would).
    """
    if not frames:
        raise NoFramesError("no frames to write")
    if not fps > 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    fmt = animation_format(out)
    if not out.parent.is_dir() and not out.parent.parent.is_dir():
        raise FileNotFoundError(f"{out.parent}: no such directory (nor its parent)")
    images = [ref.image() for ref in frames]
    factor = auto_scale(images[0].size) if scale is None else scale
    if factor < 1:
        raise ValueError(f"scale must be >= 1, got {factor}")
    size = (images[0].size[0] * factor, images[0].size[1] * factor)
    images = [im if im.size == size else im.resize(size, Image.Resampling.NEAREST)
              for im in images]
    # GIF delays are in 10 ms units; round once so the whole animation keeps its rate.
    duration = max(10, round(1000 / fps / 10) * 10)
    out.parent.mkdir(exist_ok=True)
    images[0].save(out, format=fmt, save_all=True, append_images=images[1:],
                   duration=duration, loop=0)
    return len(images)


def export_gif(ep_dir: Path, out: Path, fps: float = 4.0, *, scale: int | None = 1) -> int:
    """Write the frames of ``ep_dir`` to ``out``; NoFramesError if it has none."""
    frames = episode_frames(ep_dir)
    if not frames:
        raise NoFramesError(f"{ep_dir} has no frames (log.jsonl references none under "
                            "assets/; was the env's frame_stride 0?)")
    return write_gif(frames, out, fps, scale=scale)
