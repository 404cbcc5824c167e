"""An episode's frames as an animated GIF (``evaltui replay EP --export ep.gif``).

The frames are those log.jsonl references as ``{"$frame": ...}`` in its records'
outputs (PNGs under ``assets/``, or records of ``frames.bin``), in log order; a frame a
node received as input was already logged as the output of the node that made it. The
log is opened without following a symlink out of the ep dir (:mod:`evaltui.safeopen`);
frames resolve only inside it (:mod:`evaltui.runview.frames`).
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from evaltui.logread import iter_log
from evaltui.runview.frames import FrameRef, record_frames
from evaltui.runview.replay import LOG_FILENAME
from evaltui.safeopen import LeavesRoot, open_inside


class NoFramesError(ValueError):
    """The episode dir holds no frames to animate (or no log.jsonl)."""


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


def write_gif(frames: list[FrameRef], out: Path, fps: float = 4.0) -> int:
    """Write ``frames`` to ``out`` as a looping GIF at ``fps``; return the frame count.

    Frames of another size than the first are scaled to it (a GIF has one canvas).
    """
    if not frames:
        raise NoFramesError("no frames to write")
    if not fps > 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    images = [ref.image() for ref in frames]
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
