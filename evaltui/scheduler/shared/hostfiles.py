"""Host files: one per shared nodeset host, saying who owns it and which runs hold it.

A scheduler writes ``{hosts_dir}/{host pid}.json`` for every host it runs (the nodeset,
its URL, ``origin``, the run ids holding it, the runs root they live in, and the
scheduler that owns it). They serve two readers:

- a restarted scheduler adopts the live hosts of its runs root whose owner is gone;
- the host itself (``nodeset_host``) watches its file once a second and exits when it
  was loaded for runs (not interactively), its owner is gone, and none of its holders'
  processes lives any more (their PIDs and create times are in their scheduler.json).
  So a model host never outlives its last run when no scheduler comes back.

Each file has a ``.lock`` beside it (flock): a host deciding to exit removes its file
under the lock, and a scheduler only adopts (or rewrites) a file it finds under the
lock, so an exiting host is never handed to a new run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evaltui.contract.pidref import PidRef
from evaltui.rundir.jsonfiles import flocked, read_json_object, write_json_atomic
from evaltui.rundir.layout import PRIVATE_MODE
from evaltui.rundir.store import read_record

HOSTS_DIRNAME = "hosts"
WATCH_INTERVAL_SEC = 1.0
UNKNOWN_GRACE_SEC = 60.0
"""A host whose file never appeared (its scheduler died while starting it) exits after this."""


def host_file(hosts_dir: Path, pid: int) -> Path:
    return Path(hosts_dir) / f"{pid}.json"


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """flock ``{path}.lock`` (created 0600) for the duration."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with flocked(path.with_suffix(".lock"), mode=PRIVATE_MODE):
        yield


def write(path: Path, data: dict[str, Any], *, create: bool) -> bool:
    """Write a host file under its lock; without ``create`` only if it still exists (a
    host that removed its file is exiting). Returns whether it was written."""
    with locked(path):
        if not create and not path.exists():
            return False
        write_json_atomic(path, data, durable=False, mode=PRIVATE_MODE)
        return True


def remove(path: Path) -> None:
    """Drop a host file and its lock (the host is stopped)."""
    path.unlink(missing_ok=True)
    path.with_suffix(".lock").unlink(missing_ok=True)


def owner_json(ref: PidRef | None) -> dict[str, float] | None:
    return None if ref is None else {"pid": ref.pid, "create_time": ref.create_time}


def _same_process(data: dict[str, Any], me: PidRef) -> bool:
    ctime = data.get("pid_create_time")
    return isinstance(ctime, int | float) and abs(ctime - me.create_time) < 0.5


def _ref(value: Any) -> PidRef | None:
    try:
        return PidRef(int(value["pid"]), float(value["create_time"]))
    except (TypeError, KeyError, ValueError):
        return None


def adoptable(hosts_dir: Path, runs_root: str | None, me: PidRef
              ) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Host files of ``runs_root`` whose host lives and whose owner is gone (or is ``me``),
    each rewritten under its lock with ``me`` as the owner before it is yielded."""
    try:
        names = sorted(os.listdir(hosts_dir))
    except OSError:
        return
    for name in names:
        if not name.endswith(".json"):
            continue
        path = Path(hosts_dir) / name
        with locked(path):
            data = read_json_object(path)
            if data is None or data.get("runs_root") != runs_root:
                continue
            host = _ref({"pid": data.get("pid"), "create_time": data.get("pid_create_time")})
            owner = _ref(data.get("owner"))
            if host is None or not host.alive():
                continue
            if owner is not None and owner != me and owner.alive():
                continue  # another live scheduler on this runs root runs it
            data["owner"] = owner_json(me)
            write_json_atomic(path, data, durable=False, mode=PRIVATE_MODE)
        yield path, data


# --- the host's side ---------------------------------------------------------------------


def holder_alive(runs_root: str, run_id: str) -> bool:
    """True if the run's process (scheduler.json pid + create time) still lives."""
    record = read_record(Path(runs_root) / run_id) or {}
    try:
        ref = PidRef(int(record["pid"]), float(record["pid_create_time"]))
    except (OSError, ValueError, TypeError, KeyError):
        return False  # no process yet (or ever): nothing holds the host through it
    return ref.alive()


def exit_reason(data: dict[str, Any]) -> str | None:
    """Why the host described by ``data`` should end now, or None while it is needed."""
    if data.get("origin") != "scheduler":
        return None  # loaded by hand: only an unload ends it
    owner = _ref(data.get("owner"))
    if owner is not None and owner.alive():
        return None  # its scheduler unloads it on the tick after its last run
    runs_root, holders = data.get("runs_root"), data.get("holders") or []
    if isinstance(runs_root, str) and any(holder_alive(runs_root, str(r)) for r in holders):
        return None
    return (f"no scheduler and no run holds it any more (holders: "
            f"{', '.join(map(str, holders)) or 'none'})")


class HolderWatch:
    """The host's view of its own file: :meth:`check` once in a while says when to exit."""

    def __init__(self, hosts_dir: Path, me: PidRef | None = None,
                 grace_sec: float = UNKNOWN_GRACE_SEC) -> None:
        self.me = me or PidRef.current()
        self.path = host_file(hosts_dir, self.me.pid)
        self.grace_sec = grace_sec
        self.started = time.monotonic()
        self.seen = False

    def check(self) -> str | None:
        """None to keep hosting, else why to exit (the file is then removed, under its
        lock, so no scheduler adopts a host on its way out)."""
        with locked(self.path):
            data = read_json_object(self.path)
            if data is not None and not _same_process(data, self.me):
                data = None  # a file of an earlier process with this PID
            if data is None:
                if self.seen:
                    return "its scheduler stopped it"
                if time.monotonic() - self.started > self.grace_sec:
                    remove(self.path)
                    return "no scheduler ever recorded it"
                return None
            self.seen = True
            reason = exit_reason(data)
            if reason is not None:
                remove(self.path)
            return reason
