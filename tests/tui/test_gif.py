"""``evaltui replay EP --export ep.gif``: the episode's frames as an animated GIF."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageSequence

from evaltui.cli import main
from evaltui.engine.episode.logger import ExecutionLogger
from evaltui.engine.nodes import Frame
from evaltui.runview.gif import episode_frames

RED, GREEN, BLUE = (220, 20, 20), (20, 200, 20), (20, 20, 220)


def solid(color: tuple[int, int, int], size: int = 16) -> Frame:
    return Frame(pixels=np.full((size, size, 3), color, dtype=np.uint8))


def write_episode(ep_dir: Path, colors: list[tuple[int, int, int] | None]) -> None:
    """An ep dir logged by the real ExecutionLogger: one env step per colour (None: no frame)."""
    with ExecutionLogger(ep_dir) as logger:
        logger.record("episode_start", step=0, nodeset="env",
                      outputs={"frame": solid(colors[0]) if colors[0] else None})
        for step, color in enumerate(colors[1:], start=1):
            logger.record("fire", step=step, node="policy", nodeset="policy",
                          inputs={"obs": 1}, outputs={"action": 2})
            logger.record("fire", step=step, node="env_step", nodeset="env",
                          inputs={"action": 2},
                          outputs={"frame": solid(color) if color else None, "done": False})
        logger.record("episode_end", step=len(colors) - 1, outputs={"status": "ok"})
    (ep_dir / "episode.json").write_text('{"episode_index": 0, "status": "ok"}')


def gif_colors(path: Path) -> tuple[list[tuple[int, int, int]], list[int]]:
    """The centre colour and the duration (ms) of each frame of a GIF."""
    colors, durations = [], []
    with Image.open(path) as im:
        assert im.info.get("loop") == 0  # loops forever
        for frame in ImageSequence.Iterator(im):
            rgb = frame.convert("RGB")
            colors.append(rgb.getpixel((rgb.width // 2, rgb.height // 2)))
            durations.append(frame.info["duration"])
    return colors, durations


def test_export_writes_the_frames_in_log_order(tmp_path: Path, capsys) -> None:
    ep = tmp_path / "ep0000"
    write_episode(ep, [RED, GREEN, None, BLUE])
    out = tmp_path / "out" / "ep.gif"
    assert main(["replay", str(ep), "--export", str(out), "--fps", "5"]) == 0
    assert "wrote 3 frames at 5 fps" in capsys.readouterr().out
    colors, durations = gif_colors(out)
    assert colors == [RED, GREEN, BLUE]  # the palette keeps these few colours exactly
    assert durations == [200, 200, 200]


def test_frames_are_the_logged_outputs_inside_the_dir(tmp_path: Path) -> None:
    ep = tmp_path / "ep0000"
    write_episode(ep, [RED, GREEN])
    outside = tmp_path / "outside.png"
    Image.new("RGB", (4, 4)).save(outside)
    with open(ep / "log.jsonl", "ab") as fh:  # a copied dir pointing out of itself
        fh.write(b'{"step": 2, "event": "fire", "node": "env_step", '
                 b'"outputs": {"frame": {"$frame": "../outside.png"}}}\n')
        fh.write(b'{"step": 3, "event": "fire", "node": "env_step", '
                 b'"outputs": {"frame": {"$frame": "assets/gone.png"}}}\n')
    names = [p.name for p in episode_frames(ep)]
    assert names == sorted(p.name for p in (ep / "assets").iterdir())
    assert len(names) == 2


def test_no_frames_is_a_clear_error(tmp_path: Path, capsys) -> None:
    ep = tmp_path / "ep0000"
    write_episode(ep, [None, None, None])
    out = tmp_path / "ep.gif"
    assert main(["replay", str(ep), "--export", str(out)]) == 2
    assert "has no frames" in capsys.readouterr().err
    assert not out.exists()
    assert main(["replay", str(ep), "--export", str(out), "--fps", "0"]) == 2


def test_export_from_the_command_line_starts_no_tui(tmp_path: Path) -> None:
    ep = tmp_path / "ep0000"
    write_episode(ep, [BLUE, RED, RED, GREEN])
    out = tmp_path / "ep.gif"
    proc = subprocess.run([sys.executable, "-m", "evaltui.cli", "replay", str(ep), "--export",
                           str(out)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    colors, durations = gif_colors(out)
    # Two equal frames in a row become one frame shown twice as long (pillow merges them).
    assert colors == [BLUE, RED, GREEN]
    assert durations == [250, 500, 250]
