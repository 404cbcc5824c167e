"""A small tmpfs mounted for one test, and filling it: the suite's honest ENOSPC.

Only root can mount; elsewhere the fixture skips with one line. The mount is always
undone at teardown (lazily, so a process still holding a file there cannot keep it).
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

FILLER = ".filler"
_CHUNKS = (1 << 16, 1 << 12, 1 << 9, 1)


class SmallDisk:
    """A tmpfs at ``path`` of ``size`` (a mount -o size= value)."""

    def __init__(self, path: Path, size: str) -> None:
        self.path = path
        self.size = size

    def fill(self) -> None:
        """Use up every byte: the next write of any file there fails with ENOSPC."""
        fd = os.open(self.path / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for chunk in _CHUNKS:  # big chunks first, then what is left of the last page
                block = b"\0" * chunk
                while True:
                    try:
                        os.write(fd, block)
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        break
        finally:
            os.close(fd)

    def free(self) -> None:
        """Give the space back."""
        (self.path / FILLER).unlink(missing_ok=True)

    def read_only(self, on: bool) -> None:
        """Remount it read-only (every write then fails with EROFS), or writable again."""
        subprocess.run(["mount", "-o", f"remount,{'ro' if on else 'rw'}", str(self.path)],
                       check=True)

    def leftovers(self) -> list[str]:
        """Names there that are partial temp files (``.NAME.*``), the filler aside."""
        return sorted(p.name for p in self.path.rglob(".*") if p.name != FILLER)


def _mount(path: Path, size: str) -> str | None:
    """Mount a tmpfs at ``path``; None, or why it cannot be done here."""
    if os.geteuid() != 0:
        return "needs root to mount a small tmpfs (ENOSPC test)"
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                           str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        return f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}"
    return None


@pytest.fixture
def maybe_small_disk(tmp_path: Path) -> Iterator[Callable[..., SmallDisk | None]]:
    """As ``small_disk``, but None (said once on stderr) where it cannot be mounted."""
    mounted: list[Path] = []

    def make(name: str = "disk", size: str = "1m") -> SmallDisk | None:
        path = tmp_path / name
        why = _mount(path, size)
        if why is not None:
            print(f"(no small tmpfs for {name}: {why})", file=sys.stderr)
            return None
        mounted.append(path)
        return SmallDisk(path, size)

    yield make
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[..., SmallDisk]]:
    """``small_disk(name, size="1m")``: a tmpfs under tmp_path, unmounted after the test."""
    mounted: list[Path] = []

    def make(name: str = "disk", size: str = "1m") -> SmallDisk:
        path = tmp_path / name
        why = _mount(path, size)
        if why is not None:
            pytest.skip(why)
        mounted.append(path)
        return SmallDisk(path, size)

    yield make
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], check=False)
