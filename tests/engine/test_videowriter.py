"""Video frames: the logger encodes an episode's video frames into one fragmented H.264
``assets/video.mp4`` that the replay readers decode by index, readable even when the
writer never finished; frames it cannot take (odd sides) stay PNGs."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("av", reason="PyAV is not installed (pip install 'evaltui[metaworld]')")

from evaltui.engine.episode.logger import ExecutionLogger  # noqa: E402
from evaltui.engine.episode.videowriter import VIDEO_FILENAME, VideoWriter  # noqa: E402
from evaltui.engine.nodes import Frame  # noqa: E402
from evaltui.rundir.logread import read_log  # noqa: E402
from evaltui.runview.frames import record_frames  # noqa: E402
from evaltui.runview.videoframes import video_frame  # noqa: E402


def _frame(i: int, h: int = 64, w: int = 96) -> np.ndarray:
    """A smooth picture that changes with ``i`` (lossy coding keeps it close)."""
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([(x * 2 + i * 8) % 256, (y * 3) % 256, np.full_like(x, (i * 20) % 256)], -1)
    return img.astype(np.uint8)


def test_the_logger_writes_video_frames_into_one_mp4_the_readers_decode(tmp_path: Path) -> None:
    with ExecutionLogger(tmp_path) as logger:
        for step in range(1, 6):
            logger.record("fire", step=step, node="env_step", nodeset="env",
                          outputs={"frame": Frame(_frame(step), video=True)})
            logger.flush()
        logger.record("fire", step=6, node="env_step", nodeset="env",
                      outputs={"frame": Frame(_frame(6, 63, 96), video=True)})  # odd: a PNG
    assert (tmp_path / VIDEO_FILENAME).is_file()
    records, _ = read_log(tmp_path / "log.jsonl")
    refs = [ref for _, rec in records for ref in record_frames(tmp_path, rec)]
    assert [ref.at for ref in refs] == [0, 1, 2, 3, 4, None]
    assert refs[-1].path.suffix == ".png"
    for step, ref in enumerate(refs[:5], start=1):
        got = ref.pixels().astype(int)
        assert got.shape == (64, 96, 3)
        assert np.abs(got - _frame(step)).mean() < 12, step  # H.264 at crf 23: close
    with pytest.raises(ValueError, match="has 5 frames"):
        video_frame(tmp_path / VIDEO_FILENAME, 5)


def test_a_video_whose_writer_was_killed_decodes_up_to_its_last_fragment(
        tmp_path: Path) -> None:
    writer = VideoWriter(tmp_path)
    for i in range(75):  # a keyframe every 30 frames: fragments of 0-29 and 30-59 are done
        writer.put(_frame(i))
    cut = tmp_path / "cut.mp4"
    shutil.copy(writer.path, cut)  # the file as a SIGKILL would leave it
    writer.close()
    assert video_frame(writer.path, 74).shape == (64, 96, 3)
    frames = 0
    while True:
        try:
            video_frame(cut, frames)
        except ValueError:
            break
        frames += 1
    assert frames >= 30
