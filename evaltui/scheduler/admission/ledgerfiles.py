"""The reservation ledger's files, and whom the kernel says each entry belongs to.

The trust model (docs/gpu.md, "The shared ledger"): every Unix user's scheduler writes its
reservations into a file of its own, ``u{uid}.json``, in the ledger directory (set up with
the sticky bit, so only a file's owner can replace or delete it). A reader attributes each
entry to the file's *owner* as ``fstat`` reports it, never to a uid written inside, and
counts it only while its holder is a live process of that same user (``/proc/{pid}``'s
owner): another member of the group can neither release, edit nor empty someone's
reservations, and an entry naming a process of somebody else (pid 1) holds nothing.

Whatever cannot be read as a ledger file (garbage, ``{``, a directory, a link) is
*damage*: the reader says why, and the scheduler admits nothing until it is fixed (an
unreadable reservation might be protecting a running job). The pre-2 single
``ledger.json`` is read as before (live holders only, attributed to their process's
owner) so that schedulers started before an upgrade stay seen; it is never written.

Reads take no lock (every file is replaced by a rename). Deciding on free memory takes
``ledger.lock`` with a bounded wait (:data:`LOCK_WAIT_SEC`): a user holding it by hand
delays the others' admissions, never their reads or their API.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import psutil
from pydantic import ValidationError

from evaltui.contract.views import LedgerEntry
from evaltui.scheduler import procs

LEGACY_FILENAME = "ledger.json"
"""The single group-written ledger of evaltui before per-user files (read, never written)."""
LOCK_FILENAME = "ledger.lock"
VERSION = 2
LOCK_WAIT_SEC = 1.0
"""How long a transaction waits for the admission lock before it gives up for this tick
(another user holding it can delay admissions, never reads or the API)."""
OWN_LOCK_WAIT_SEC = 5.0
"""How long it waits for this user's own file lock (held only by this user's schedulers,
each for one transaction)."""
_ENTRY_FILE = re.compile(r"u(\d+)\.json")
_POLL_SEC = 0.02


def entry_filename(uid: int) -> str:
    """The name of the entry file of the user ``uid``."""
    return f"u{uid}.json"


def own_lock_filename(uid: int) -> str:
    """This user's lock (0600: only its schedulers can open it, so only they can hold it)."""
    return f"u{uid}.lock"


@dataclass
class LedgerRead:
    """Every counted entry (keyed), and what could not be read or was not counted."""

    entries: dict[str, LedgerEntry] = field(default_factory=dict)
    damage: list[str] = field(default_factory=list)
    """Why a file cannot be read as a ledger file: nothing is admitted while any."""
    forged: list[str] = field(default_factory=list)
    """Entries whose holder is another user's process: not counted (they hold nothing)."""


def process_owner(pid: int) -> int | None:
    """The (effective) uid of the live process ``pid``, as the kernel says; None if gone."""
    if pid <= 0:
        return None
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except FileNotFoundError:
        return None
    except OSError:
        try:
            return psutil.Process(pid).uids().effective
        except psutil.Error:
            return None


def read_ledger(directory: Path, me: int) -> LedgerRead:
    """Read every user's entry file (and a legacy ledger.json) in ``directory``.

    This user's own entries are all returned (its transactions purge the dead ones);
    another user's only while their holder lives and is theirs."""
    read = LedgerRead()
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        read.damage.append(f"cannot list the ledger directory {directory}: "
                           f"{exc.strerror or exc}")
        return read
    for name in names:
        if _ENTRY_FILE.fullmatch(name):
            _read_entry_file(directory / name, me, read)
    if LEGACY_FILENAME in names:
        _read_legacy(directory / LEGACY_FILENAME, me, read)
    return read


def _open_regular(path: Path) -> tuple[bytes, os.stat_result]:
    """The bytes and the owner-bearing stat of a regular file, never through a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def _load(path: Path, read: LedgerRead) -> tuple[object, int] | None:
    try:
        raw, st = _open_regular(path)
        return orjson.loads(raw), st.st_uid
    except FileNotFoundError:
        return None  # replaced or removed between the listing and now
    except OSError as exc:
        why = "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        read.damage.append(f"ledger file {path} cannot be read ({why})")
    except ValueError as exc:
        read.damage.append(f"ledger file {path} is not JSON ({exc})")
    return None


def _read_entry_file(path: Path, me: int, read: LedgerRead) -> None:
    loaded = _load(path, read)
    if loaded is None:
        return
    data, owner = loaded
    raws = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(raws,
                                                                                      list):
        read.damage.append(f"ledger file {path} (owner uid {owner}) is not a version-"
                           f"{VERSION} ledger file")
        return
    for raw in raws:
        try:
            entry = LedgerEntry.model_validate(raw)
        except ValidationError as exc:
            read.damage.append(f"ledger file {path} (owner uid {owner}) holds an invalid "
                               f"entry ({exc.error_count()} errors)")
            return
        _count(entry.model_copy(update={"uid": owner}), owner, me, read, path)


def _read_legacy(path: Path, me: int, read: LedgerRead) -> None:
    loaded = _load(path, read)
    if loaded is None:
        return
    data, _ = loaded
    raws = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(raws, dict):
        read.damage.append(f"legacy ledger file {path} is not a ledger (remove it once no "
                           "evaltui older than this one runs on this machine)")
        return
    for raw in raws.values():
        try:
            entry = LedgerEntry.model_validate(raw)
        except ValidationError:
            continue  # its writer could not have held memory with it either
        # Its uid field is what the writer said; the holder's owner is what the kernel says.
        owner = process_owner(entry.holder_pid)
        if owner is not None and procs.alive(entry.holder_pid, entry.holder_create_time):
            _count(entry.model_copy(update={"uid": owner}), owner, me, read, path)


def _count(entry: LedgerEntry, owner: int, me: int, read: LedgerRead, path: Path) -> None:
    holder = process_owner(entry.holder_pid)
    alive = holder is not None and procs.alive(entry.holder_pid, entry.holder_create_time)
    if alive and holder != owner:
        read.forged.append(f"{path}: {entry.run_id} names pid {entry.holder_pid} of uid "
                           f"{holder}, not of its owner uid {owner}")
        if owner != me:
            return
        # Our own: kept, so this user's transaction purges it as stale.
        entry = entry.model_copy(update={"holder_pid": 0})
    elif not alive and owner != me:
        return  # stale: its owner's next transaction purges it
    read.entries.setdefault(entry.key, entry)


@contextmanager
def bounded_flock(path: Path, *, wait_sec: float, create_mode: int | None,
                  owner: int | None) -> Iterator[str | None]:
    """Hold an exclusive ``flock`` on ``path`` for the block, waiting at most ``wait_sec``;
    yields None when held, else why not (the block still runs, without the lock).

    ``create_mode``: make the file if missing (else it must exist). ``owner``: the uid it
    must belong to (a file someone else made could be swapped for another by its owner,
    which would split the lock)."""
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_CREAT if create_mode is not None else 0)
        fd = os.open(path, flags, create_mode or 0)
    except OSError as exc:
        yield f"cannot open the ledger lock {path}: {exc.strerror or exc}"
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            yield f"the ledger lock {path} is not a file; admitting nothing until it is"
            return
        if owner is not None and st.st_uid != owner:
            yield (f"the ledger lock {path} belongs to uid {st.st_uid}, not uid {owner} "
                   "(`sudo evaltui ledger setup` makes it right)")
            return
        deadline = time.monotonic() + wait_sec
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield (f"the ledger lock {path} is held by {lock_holder(st) or 'someone'}"
                           f" for over {wait_sec:g} s; admitting nothing until it is free")
                    return
                time.sleep(_POLL_SEC)
        yield None
    finally:
        os.close(fd)  # closing the descriptor drops the lock


def lock_holder(st: os.stat_result) -> str | None:
    """``pid N (uid U)`` of a process holding a flock on the file ``st``, from /proc/locks."""
    inode = f":{st.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5].endswith(inode):
            pid = int(parts[4])
            return f"pid {pid} (uid {process_owner(pid)})"
    return None
