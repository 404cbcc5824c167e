"""VideoWriter: an episode's video frames encoded as one ``assets/video.mp4`` in its dir
(under ``assets/`` with the PNG frames, so every executor brings it back as it does them).

H.264 (yuv420p, 30 frames a second nominal, one frame per logged frame) in a *fragmented*
MP4 (``frag_keyframe+empty_moov``): the file is playable -- by the replay viewer and by a
browser, which plays H.264 MP4 natively -- up to its last complete fragment even when the
worker is killed mid-episode. Encoding runs on the worker's thread: ~1-3 ms a 224x224
frame, small beside rendering it. PyAV (``av``, FFmpeg in its wheel: the
``evaltui[metaworld]`` extra) is imported at the first frame only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

VIDEO_FILENAME = "assets/video.mp4"
"""Relative to the episode dir."""
CODEC = "libx264"
FPS = 30
_MUXER_OPTIONS = {"movflags": "frag_keyframe+empty_moov+default_base_moof",
                  "flush_packets": "1"}  # each fragment on disk as it is made
# A keyframe every 30 frames: a fragment a second of video at most, lost on a kill.
_CODEC_OPTIONS = {"g": "30", "preset": "veryfast", "crf": "23"}


class VideoWriter:
    """Appends frames of one shape to ``ep_dir/assets/video.mp4``; ``put`` answers their
    index."""

    def __init__(self, ep_dir: Path) -> None:
        self.path = ep_dir / VIDEO_FILENAME
        self._out: Any = None
        self._stream: Any = None
        self._shape: tuple[int, ...] | None = None
        self._count = 0

    def accepts(self, pixels: Any) -> bool:
        """Whether ``pixels`` can go in: H x W x 3 uint8 with even sides (yuv420p), and
        the shape of the video's first frame."""
        arr = np.asarray(pixels)
        if arr.ndim != 3 or arr.shape[2] != 3 or arr.dtype != np.uint8:
            return False
        if arr.shape[0] % 2 or arr.shape[1] % 2:
            return False
        return self._shape is None or arr.shape == self._shape

    def put(self, pixels: Any) -> int:
        """Encode one frame; its 0-based index in the video."""
        arr = np.ascontiguousarray(pixels)
        if self._out is None:
            self._open(arr.shape)
        import av  # optional: av (PyAV, the metaworld extra); _open loaded it

        frame = av.VideoFrame.from_ndarray(arr, format="rgb24")
        frame.pts = self._count
        for packet in self._stream.encode(frame):
            self._out.mux(packet)
        self._count += 1
        return self._count - 1

    def _open(self, shape: tuple[int, ...]) -> None:
        # optional: av (PyAV, the metaworld extra): only envs that emit video frames need it
        import av

        self.path.parent.mkdir(exist_ok=True)
        self._out = av.open(str(self.path), "w", format="mp4", options=_MUXER_OPTIONS)
        self._stream = self._out.add_stream(CODEC, rate=FPS, options=_CODEC_OPTIONS)
        self._stream.height, self._stream.width = shape[0], shape[1]
        self._stream.pix_fmt = "yuv420p"
        self._shape = tuple(shape)

    def close(self) -> None:
        """Flush the encoder and finish the file (nothing to do without a frame)."""
        if self._out is None:
            return
        try:
            for packet in self._stream.encode(None):
                self._out.mux(packet)
        finally:
            self._out.close()
            self._out = None
