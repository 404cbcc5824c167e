"""Pid files of the backends ``evaltui run`` started: ``state_dir()/backends/{port}.pid``.

Each records the backend's PID *and* create time, so ``evaltui teardown`` stops exactly
the process that was started, never a reused PID. The backend's log sits beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evaltui.contract.pidref import PidRef
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import state_dir


def backends_dir() -> Path:
    """``state_dir()/backends``, created 0700."""
    path = state_dir() / "backends"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class PidFile:
    """A backend ``evaltui run`` started."""

    pid: int
    create_time: float
    port: int
    url: str
    outputs: str
    log: str
    started_at: float

    @property
    def ref(self) -> PidRef:
        return PidRef(self.pid, self.create_time)


def pid_file_path(port: int) -> Path:
    """Where the pid file of the backend on ``port`` lives."""
    return backends_dir() / f"{port}.pid"


def read_pid_file(path: Path) -> PidFile | None:
    """The pid file at ``path``, or None if missing or unreadable."""
    try:
        data = read_json(path)
        return PidFile(**{k: data[k] for k in PidFile.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pid_files() -> list[Path]:
    """Every pid file, by port."""
    return sorted(backends_dir().glob("*.pid"), key=lambda p: (len(p.stem), p.stem))
