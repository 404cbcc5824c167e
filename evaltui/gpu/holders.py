"""Who holds each GPU's memory: per process, its user, its MiB and which run it is.

What nvitop users look at first. The GPU reading (NVML's
``nvmlDeviceGetComputeRunningProcesses``, or the fake GPU's charges) gives PIDs and
MiB; this module says whose they are, without a scheduler: a process belongs to a run
when it or one of its ancestors is the run's process (``scheduler.json``'s pid and
create time: the run's zygote and env workers are its descendants), and to a shared
nodeset when it or an ancestor is a host named in the shared hosts' files, and to an
admitted admit entry (``evaltui serve-policy``, or a command ``evaltui run`` wraps) when
it or an ancestor holds the entry (its file in the state dir). Anything else is shown by
its command name, as nvitop does.

Shared by ``evaltui gpus`` and the TUI's resources panel (headless: no Textual here).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import psutil

from evaltui.contract.pidref import PidRef
from evaltui.contract.records import DONE_FILENAME
from evaltui.rundir.jsonfiles import read_json_object
from evaltui.rundir.layout import state_dir
from evaltui.rundir.store import read_record


class ProcessMemory(Protocol):
    """A process's memory on one GPU, as a GPU reading gives it."""

    pid: int
    used_mb: int


class GpuProcesses(Protocol):
    """One GPU of a reading: its index and its processes (None: not attributable)."""

    index: Any
    processes: Sequence[ProcessMemory] | None


@dataclass(frozen=True)
class GpuHolder:
    """One process holding memory on one GPU, and whose it is."""

    gpu: int
    pid: int
    used_mb: int
    user: str | None
    """The process's user name (its uid where the name is unknown); None if gone."""
    command: str | None
    """Its process name (``python3``); None if it could not be read."""
    run_id: str | None = None
    """The run it belongs to (it is the run's process or one of its descendants)."""
    nodeset: str | None = None
    """The shared nodeset it hosts (the host or one of its descendants)."""
    holders: tuple[str, ...] = ()
    """The runs using that shared nodeset."""
    admit: str | None = None
    """The admitted admit entry it holds (``admit:ID``), with its kind: ``serve`` (an
    ``evaltui serve-policy``) or ``run`` (a command ``evaltui run`` wraps)."""
    admit_kind: str | None = None

    @property
    def what(self) -> str:
        """``run 20260115_090500``, ``shared policy · runs A, B``, ``serve admit:ID``,
        ``evaltui run admit:ID``, or the command."""
        if self.run_id is not None:
            return f"run {self.run_id}"
        if self.nodeset is not None:
            using = f" · runs {', '.join(self.holders)}" if self.holders else ""
            return f"shared {self.nodeset}{using}"
        if self.admit is not None:
            return f"{'serve' if self.admit_kind == 'serve' else 'evaltui run'} {self.admit}"
        return self.command or "?"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_Owner = tuple[PidRef, dict[str, Any]]
"""A process that owns what its descendants hold, and the :class:`GpuHolder` fields
saying whose they are (``run_id``, or ``nodeset`` and ``holders``, or ``admit`` and
``admit_kind``)."""


def shared_hosts_dir() -> Path:
    """Where the scheduler writes one file per shared nodeset host (``state_dir()/shared/
    hosts``, as ``evaltui.scheduler.shared.launcher.hosts_dir``; a test keeps them equal):
    named here so that reading it needs no scheduler import."""
    return state_dir() / "shared" / "hosts"


def admits_dir() -> Path:
    """Where the scheduler keeps one file per admit entry (``state_dir()/admits``, as
    ``evaltui.scheduler.admits.entry.AdmitStore``; a test keeps them equal)."""
    return state_dir() / "admits"


def live_run_dirs(runs_root: Path) -> list[Path]:
    """Run dirs that may still have processes: those without ``_DONE``."""
    try:
        entries = list(os.scandir(runs_root))
    except OSError:
        return []
    return [Path(e.path) for e in entries
            if e.is_dir(follow_symlinks=False) and not os.path.exists(
                os.path.join(e.path, DONE_FILENAME))]


def gpu_holders(gpus: Iterable[GpuProcesses], *, run_dirs: Iterable[Path],
                hosts_dir: Path | None = None, admits: Path | None = None
                ) -> dict[int, list[GpuHolder] | None]:
    """Per GPU index, its processes with whose they are, most memory first.

    ``run_dirs``: the runs a process may belong to (their scheduler.json names the run
    process); ``hosts_dir``: the shared hosts' files (default :func:`shared_hosts_dir`);
    ``admits``: the admit entries' files (default :func:`admits_dir`).
    A GPU whose driver cannot attribute memory to processes maps to None.
    """
    gpus = list(gpus)
    if not any(g.processes for g in gpus):
        return {int(g.index): None if g.processes is None else [] for g in gpus}
    owners = {o[0].pid: o for o in (*_admit_owners(admits or admits_dir()),
                                     *_run_owners(run_dirs),
                                     *_host_owners(hosts_dir or shared_hosts_dir()))}
    out: dict[int, list[GpuHolder] | None] = {}
    for gpu in gpus:
        if gpu.processes is None:
            out[int(gpu.index)] = None
            continue
        found = [_holder(int(gpu.index), p.pid, p.used_mb, owners) for p in gpu.processes]
        out[int(gpu.index)] = sorted(found, key=lambda h: (-h.used_mb, h.pid))
    return out


def _holder(gpu: int, pid: int, used_mb: int, owners: Mapping[int, _Owner]) -> GpuHolder:
    user = command = None
    whose: dict[str, Any] = {}
    with contextlib.suppress(psutil.Error):  # gone since the reading, or not ours to inspect
        proc = psutil.Process(pid)
        with proc.oneshot():
            command = proc.name()
            try:
                user = proc.username()
            except (KeyError, psutil.Error):  # a uid with no name (containers)
                user = str(proc.uids().real)
        for candidate in (proc, *proc.parents()):
            known = owners.get(candidate.pid)
            if known is not None and _same(candidate, known[0]):
                whose = known[1]
                break
    return GpuHolder(gpu, pid, used_mb, user, command, **whose)


def _same(proc: psutil.Process, ref: PidRef) -> bool:
    """The very process ``ref`` names (a reused PID is someone else's)."""
    try:
        return abs(proc.create_time() - ref.create_time) <= 1.0
    except psutil.Error:
        return False


def _ref(data: Mapping[str, Any], pid: str = "pid", create_time: str = "pid_create_time"
         ) -> PidRef | None:
    try:
        return PidRef(int(data[pid]), float(data[create_time]))
    except (KeyError, TypeError, ValueError):
        return None


def _run_owners(run_dirs: Iterable[Path]) -> list[_Owner]:
    owners = []
    for run_dir in run_dirs:
        record = read_record(Path(run_dir))
        ref = _ref(record) if record else None
        if ref is not None:
            owners.append((ref, {"run_id": Path(run_dir).name}))
    return owners


def _json_objects(directory: Path) -> list[tuple[Path, dict[str, Any]]]:
    """The readable JSON objects of ``directory``'s ``*.json`` files, by file name."""
    try:
        paths = sorted(Path(directory).glob("*.json"))
    except OSError:
        return []
    return [(path, data) for path in paths if (data := read_json_object(path)) is not None]


def _admit_owners(directory: Path) -> list[_Owner]:
    """The holders of admitted entries (a waiting one holds no GPU memory yet)."""
    owners = []
    for path, data in _json_objects(directory):
        ref = _ref(data, "holder_pid", "holder_create_time")
        if data.get("state") == "admitted" and ref is not None:
            owners.append((ref, {"admit": f"admit:{data.get('admit_id', path.stem)}",
                                 "admit_kind": str(data.get("kind") or "run")}))
    return owners


def _host_owners(hosts_dir: Path) -> list[_Owner]:
    owners = []
    for _path, data in _json_objects(hosts_dir):
        ref = _ref(data)
        if ref is not None:
            holders = tuple(str(h) for h in data.get("holders") or ())
            owners.append((ref, {"nodeset": str(data.get("name") or "?"), "holders": holders}))
    return owners
