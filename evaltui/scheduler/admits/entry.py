"""An admit entry (a queue place for a command ``evaltui run`` wraps) and its file.

Each entry not yet released lives in ``state_dir()/admits/{admit_id}.json`` (written
atomically, mode 0600), so that a backend restarted on the same outputs root finds the
wrappers that were waiting, in their order, and the commands that were admitted.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from evaltui.contract.pidref import PidRef
from evaltui.contract.states import AdmitState
from evaltui.contract.views import Admit
from evaltui.gpu.env import gpu_env
from evaltui.rundir.jsonfiles import read_json_object, write_json_atomic
from evaltui.rundir.layout import state_dir
from evaltui.scheduler.admission.decision import Candidate, Wait

ADMIT_PREFIX = "admit:"
"""Ledger ``run_id`` (and queue id) of an admit entry: ``admit:{admit_id}``."""


# Fields of an entry's file: what a restarted backend needs (not the live wait reason).
_STORED = ("admit_id", "label", "command", "priority", "exclusive", "vram_mb", "queued_at",
           "state", "gpu", "reserved_mb", "key", "admitted_at", "cpus", "kind", "url",
           "requests_served", "ram_mb")


@dataclass(eq=False)
class Entry:
    """An admit entry in memory (the scheduler's lock guards it)."""

    label: str
    command: str
    priority: int
    exclusive: bool
    vram_mb: int | None
    holder: PidRef
    seq: int
    queued_at: float
    admit_id: str = field(default_factory=lambda: secrets.token_hex(6))
    state: AdmitState = AdmitState.WAITING
    wait: Wait | None = None
    gpu: int | None = None
    reserved_mb: int | None = None
    key: str | None = None
    """Ledger key of the reservation while admitted."""
    admitted_at: float | None = None
    released_at: float | None = None
    release_reason: str | None = None
    version: int = 0
    cpus: float = 0.0
    """CPU cores it reserves (its profile's ``cpus``; 0: none)."""
    kind: str = "run"
    """``run`` (a command ``evaltui run`` wraps) or ``serve`` (``evaltui serve-policy``)."""
    url: str | None = None
    requests_served: int | None = None
    """A serving entry's address and requests answered, as it last reported them."""
    ram_mb: int = 0
    """Host RAM it reserves (MiB; 0: none)."""

    @property
    def ledger_id(self) -> str:
        return f"{ADMIT_PREFIX}{self.admit_id}"

    def sort_key(self) -> tuple[int, float, int]:
        """The queue order of eval runs (jobs.Job.sort_key): priority, age, arrival."""
        return (-self.priority, self.queued_at, self.seq)

    def candidate(self) -> Candidate:
        return Candidate(self.ledger_id, self.vram_mb or 0, self.ram_mb, self.exclusive,
                         needs_gpu=self.exclusive or bool(self.vram_mb),
                         waiting_since=self.queued_at, cpus=self.cpus)

    def release(self, reason: str, at: float) -> None:
        self.state, self.released_at, self.release_reason = AdmitState.RELEASED, at, reason
        self.wait, self.key = None, None

    def info(self, fake_gpus: bool) -> Admit:
        admitted = self.state is AdmitState.ADMITTED
        return Admit(
            admit_id=self.admit_id, label=self.label, command=self.command, state=self.state,
            priority=self.priority, exclusive=self.exclusive, vram_mb=self.vram_mb,
            reserved_mb=self.reserved_mb, gpu=self.gpu, holder_pid=self.holder.pid,
            holder_create_time=self.holder.create_time, waiting_reason=self.reason(),
            queued_at=self.queued_at, admitted_at=self.admitted_at,
            released_at=self.released_at, release_reason=self.release_reason,
            env=gpu_env(self.gpu, fake_gpus) if admitted else {}, version=self.version,
            kind="serve" if self.kind == "serve" else "run", url=self.url,
            requests_served=self.requests_served, ram_mb=self.ram_mb)

    def reason(self) -> str | None:
        if self.state is not AdmitState.WAITING:
            return None
        return self.wait.reason if self.wait is not None else "queued: admission at the next tick"

    def queued_iso(self) -> str:
        return datetime.fromtimestamp(self.queued_at).astimezone().isoformat(
            timespec="milliseconds")


class AdmitStore:
    """The files of the admit entries of one state dir."""

    def __init__(self, directory: Path | None = None) -> None:
        self.dir = directory or state_dir() / "admits"

    def save(self, entry: Entry, owner: str, outputs: str) -> None:
        """Write the entry's file (atomic, 0600): a reader sees the old one or the new."""
        data = {name: getattr(entry, name) for name in _STORED}
        data.update(holder_pid=entry.holder.pid, holder_create_time=entry.holder.create_time,
                    owner=owner, outputs=outputs)
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_json_atomic(self.dir / f"{entry.admit_id}.json", data, mode=0o600)

    def remove(self, admit_id: str) -> None:
        (self.dir / f"{admit_id}.json").unlink(missing_ok=True)

    def load_all(self) -> list[dict[str, Any]]:
        """Every readable entry file (a torn or foreign file is skipped)."""
        out = []
        for path in sorted(self.dir.glob("*.json")) if self.dir.is_dir() else ():
            data = read_json_object(path)
            if data is not None and data.get("admit_id") == path.stem:
                out.append(data)
        return out


def entry_from(data: dict[str, Any], seq: int) -> Entry | None:
    """An entry from its file's fields, or None if they are not an entry's."""
    try:
        entry = Entry(
            label=str(data["label"]), command=str(data.get("command") or ""),
            priority=int(data["priority"]), exclusive=bool(data["exclusive"]),
            vram_mb=None if data.get("vram_mb") is None else int(data["vram_mb"]),
            holder=PidRef(int(data["holder_pid"]), float(data["holder_create_time"])),
            seq=seq, queued_at=float(data["queued_at"]), admit_id=str(data["admit_id"]),
            state=AdmitState(data["state"]),
            gpu=None if data.get("gpu") is None else int(data["gpu"]),
            reserved_mb=None if data.get("reserved_mb") is None else int(data["reserved_mb"]),
            key=data.get("key") if isinstance(data.get("key"), str) else None,
            admitted_at=None if data.get("admitted_at") is None
            else float(data["admitted_at"]), cpus=float(data.get("cpus") or 0.0),
            kind="serve" if data.get("kind") == "serve" else "run",
            url=data["url"] if isinstance(data.get("url"), str) else None,
            requests_served=None if data.get("requests_served") is None
            else int(data["requests_served"]), ram_mb=int(data.get("ram_mb") or 0))
    except (KeyError, TypeError, ValueError):
        return None
    return entry if entry.state is not AdmitState.RELEASED else None
