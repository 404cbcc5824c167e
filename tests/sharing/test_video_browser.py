"""An episode video as the report embeds it plays in Debian's headless chromium: the
format and codec evaltui writes (H.264 in a fragmented MP4) are ones the browser decodes."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from chromium_driver import chromium, file_url, missing

pytestmark = pytest.mark.browser
if missing() is not None:
    pytest.skip(str(missing()), allow_module_level=True)
pytest.importorskip("av", reason="PyAV is not installed (pip install 'evaltui[metaworld]')")

from evaltui.engine.episode.videowriter import VideoWriter  # noqa: E402


def test_chromium_plays_the_episode_video(tmp_path: Path) -> None:
    writer = VideoWriter(tmp_path)
    y, x = np.mgrid[0:224, 0:224]
    for i in range(45):
        writer.put(np.stack([(x + 4 * i) % 256, y % 256, np.full_like(x, 6 * i % 256)],
                            -1).astype(np.uint8))
    writer.close()
    page = tmp_path / "page.html"
    page.write_text('<!doctype html><video id="v" muted playsinline preload="auto" '
                    f'src="{writer.path.relative_to(tmp_path)}"></video>')
    with chromium() as driver:
        driver.get(file_url(page))
        deadline = time.monotonic() + 20
        state: dict = {}
        while time.monotonic() < deadline:
            state = driver.execute_script(
                "const v = document.getElementById('v'); return {ready: v.readyState, "
                "error: v.error && v.error.code, width: v.videoWidth, duration: v.duration};")
            if state["error"] or state["ready"] >= 2:
                break
            time.sleep(0.1)
    assert state["error"] is None, state
    assert state["ready"] >= 2 and state["width"] == 224, state
    assert state["duration"] == pytest.approx(45 / 30, abs=0.1)
