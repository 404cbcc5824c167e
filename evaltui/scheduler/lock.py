"""The interactive lock: "someone is driving a model by hand, admit nothing" (DESIGN §6).

It lives in ``state_dir()/interactive_lock.json`` so that every scheduler on the machine
honours it, and it expires by itself (TTL) so that a crashed UI cannot block the queue
forever. The holder refreshes it by acquiring again with the same owner.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

from evaltui.rundir.jsonfiles import flocked, write_json_atomic
from evaltui.rundir.layout import PRIVATE_MODE, state_dir
from evaltui.scheduler.admission.decision import format_clock

LOCK_FILENAME = "interactive_lock.json"
MAX_TTL_SEC = 24 * 3600.0


@dataclass(frozen=True)
class LockInfo:
    """Who holds the interactive lock, and until when (``time.time()`` values)."""

    owner: str
    acquired_at: float
    expires_at: float
    pid: int

    @property
    def reason(self) -> str:
        """The waiting_reason every queued job shows while the lock is held."""
        return f"interactive lock held by {self.owner} until {format_clock(self.expires_at)}"


class LockHeldError(RuntimeError):
    """Someone else holds the interactive lock."""

    def __init__(self, info: LockInfo) -> None:
        super().__init__(info.reason)
        self.info = info


class InteractiveLock:
    """Take, refresh, release and read the machine-wide interactive lock."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else state_dir()
        self.path = self.directory / LOCK_FILENAME
        self._guard = self.directory / "interactive_lock.lock"
        self._cached: tuple[tuple[int, int], LockInfo | None] | None = None

    def acquire(self, owner: str, ttl_sec: float = 300.0) -> LockInfo:
        """Take the lock for ``ttl_sec`` (or extend it if ``owner`` already holds it)."""
        if not owner or not owner.strip():
            raise ValueError("owner must be a non-empty name")
        if not 0 < ttl_sec <= MAX_TTL_SEC:
            raise ValueError(f"ttl_sec must be in (0, {MAX_TTL_SEC:.0f}], got {ttl_sec}")
        with self._locked():
            held = self._read()
            now = time.time()
            if held is not None and held.owner != owner and held.expires_at > now:
                raise LockHeldError(held)
            info = LockInfo(owner, held.acquired_at if held and held.owner == owner else now,
                            now + ttl_sec, os.getpid())
            write_json_atomic(self.path, asdict(info), mode=PRIVATE_MODE)
            return info

    def release(self, owner: str | None = None) -> bool:
        """Drop the lock (only if held by ``owner``, unless None); True if it was dropped."""
        with self._locked():
            held = self._read()
            if held is None or (owner is not None and held.owner != owner):
                return False
            self.path.unlink(missing_ok=True)
            return True

    def current(self) -> LockInfo | None:
        """The lock if held and not expired (one stat when nothing changed)."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        if self._cached is None or self._cached[0] != stamp:
            self._cached = (stamp, self._read())
        info = self._cached[1]
        return info if info is not None and info.expires_at > time.time() else None

    def _read(self) -> LockInfo | None:
        try:
            data = orjson.loads(self.path.read_bytes())
            return LockInfo(str(data["owner"]), float(data["acquired_at"]),
                            float(data["expires_at"]), int(data["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with flocked(self._guard):
            yield
