"""EpisodeSink: the run dir's copy of one attempt's files, fed with pulled chunks.

A Ray worker actor logs into node-local scratch; the run process appends what it pulls
here, in order (a pull is applied only if it was asked at the current offsets), so the
ep dir grows step by step as a local worker's would. Like the local logger, a new
attempt truncates ``log.jsonl`` when it starts and ``frames.bin`` at its first frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from evaltui.contract.records import ASSETS_DIRNAME
from evaltui.engine.executor.ray.actors import PULLED_FILES


class EpisodeSink:
    """Appends one attempt's pulled bytes into ``ep_dir``; ``offsets`` is what it holds."""

    def __init__(self, ep_dir: Path) -> None:
        self.ep_dir = ep_dir
        ep_dir.mkdir(parents=True, exist_ok=True)
        # An earlier attempt's log must not pass for this one's.
        (ep_dir / PULLED_FILES[0]).write_bytes(b"")
        self.offsets = dict.fromkeys(PULLED_FILES, 0)

    def append(self, chunks: Mapping[str, bytes]) -> None:
        for name, data in chunks.items():
            if name not in self.offsets or not data:
                continue
            with open(self.ep_dir / name, "ab" if self.offsets[name] else "wb") as fh:
                fh.write(data)
            self.offsets[name] += len(data)

    def write_assets(self, files: Mapping[str, bytes]) -> None:
        assets = self.ep_dir / ASSETS_DIRNAME
        assets.mkdir(exist_ok=True)
        for name, data in files.items():
            (assets / Path(name).name).write_bytes(data)
