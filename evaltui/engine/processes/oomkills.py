"""Was a SIGKILLed worker the kernel's OOM killer's? Ask the memory cgroup's counter.

A worker killed for memory reads "signal 9" like one killed by hand; the kernel counts
its OOM kills per memory cgroup: ``oom_kill`` in ``memory.events`` (cgroup v2) or in
``memory.oom_control`` (v1, kernel >= 4.13). :class:`OomKills` sums the counters of this
process's memory cgroup and of its ancestors (a limit on any of them kills here), and
says whether they grew since it last looked. Where no counter can be read (no cgroup
mounted, an old kernel) it never claims an OOM kill.
"""

from __future__ import annotations

from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
OOM_KILLED = "killed by the kernel's OOM killer (memory limit)"


def _counter(path: Path) -> int | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def _memory_cgroup_dirs(pid: str = "self") -> list[Path]:
    """This process's memory cgroup dir and its ancestors' (v2, else v1), innermost first."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: the unified hierarchy, mounted at /sys/fs/cgroup
            base, name = CGROUP_ROOT, "memory.events"
        elif "memory" in controllers.split(","):
            base, name = CGROUP_ROOT / controllers, "memory.oom_control"
        else:
            continue
        where = base / path.lstrip("/")
        dirs = [where, *where.parents]
        found = [d / name for d in dirs if d == base or base in d.parents]
        if any(p.exists() for p in found):
            return found
    return []


class OomKills:
    """Tells whether the kernel OOM-killed something in this cgroup since the last call."""

    def __init__(self) -> None:
        self._files = _memory_cgroup_dirs()
        self._last = self._total()

    def _total(self) -> int | None:
        counts = [c for c in map(_counter, self._files) if c is not None]
        return sum(counts) if counts else None

    def since_last(self) -> bool:
        """True if the OOM kill counters grew since the last call (or the start)."""
        now = self._total()
        grew = now is not None and self._last is not None and now > self._last
        self._last = now
        return grew
