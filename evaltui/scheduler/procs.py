"""Cheap process facts for the tick: liveness by PID + create time, session, RSS.

``PidRef.alive`` (psutil) costs ~60 µs; the tick asks this about every ledger entry and
every fake-GPU charge, so on Linux these read ``/proc/{pid}/stat`` once instead (~15 µs),
and fall back to psutil elsewhere. The create-time rule is the same as rundir's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import psutil

from evaltui.contract.pidref import PidRef

_TOLERANCE_SEC = 0.5
_BOOT_TIME_TTL_SEC = 30.0
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE_MB = (os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096) / (1 << 20)
_HAVE_PROC = os.path.exists("/proc/self/stat")
_boot: tuple[float, float] = (0.0, -1e9)  # (boot time, monotonic time it was read)


def _boot_time() -> float:
    global _boot
    value, read_at = _boot
    now = time.monotonic()
    if now - read_at > _BOOT_TIME_TTL_SEC:  # btime moves when the wall clock is stepped
        _boot = (psutil.boot_time(), now)
    return _boot[0]


def _stat_fields(pid: int) -> list[bytes] | None:
    """Fields of /proc/{pid}/stat after the command name (index 0 = state), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].split()


def alive(pid: int, create_time: float) -> bool:
    """True if the process ``pid`` created at ``create_time`` still runs (not a zombie)."""
    if pid <= 0:
        return False
    if not _HAVE_PROC:
        return PidRef(pid, create_time).alive()
    fields = _stat_fields(pid)
    if fields is None or fields[0] in (b"Z", b"X"):
        return False
    started = _boot_time() + int(fields[19]) / _CLK_TCK
    return abs(started - create_time) <= _TOLERANCE_SEC


def session_of(pid: int) -> int | None:
    """The session id of ``pid``, or None if it is gone or not visible from here."""
    try:
        return os.getsid(pid)
    except OSError:
        return None


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (the kernel's children file where it exists)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(x) for x in f.read().split()]
    except FileNotFoundError:
        if _HAVE_PROC and not os.path.exists(f"/proc/{pid}"):
            return []
    except OSError:
        return []
    try:
        return [c.pid for c in psutil.Process(pid).children()]
    except psutil.Error:
        return []


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants, in MiB (0 if it is gone)."""
    if not _HAVE_PROC:
        return _psutil_tree_rss_mb(pid)
    total_pages = 0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/statm", "rb") as f:
                total_pages += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total_pages * _PAGE_MB


def _tree(pid: int) -> Iterator[int]:
    """``pid`` and its descendants, each once (a gone one has no children)."""
    stack, seen = [pid], set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        yield p
        stack.extend(children(p))


def _psutil_tree_rss_mb(pid: int) -> float:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total / (1 << 20)


def tree_cpu_sec(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` and all its descendants, with those of the
    children each has reaped (0 if it is gone): a run's CPU use between two readings."""
    total = 0.0
    for p in _tree(pid):
        try:
            times = psutil.Process(p).cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total
