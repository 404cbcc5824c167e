"""The machine-wide reservation ledger: what every scheduler on this machine has admitted.

``ledger.json`` in the machine-wide ledger directory (every Unix user's schedulers;
ledgerdir.py), else in the per-user state dir, holds one reservation per admitted run (or
hosted nodeset), recording the uid of the user whose process made it: anyone reads all of
them, a user releases only their own, and a dead holder's entry is purged by anyone.
Entries are keyed by their holder process (PID and create time) and run id. Every
read-decide-write goes through :meth:`Ledger.transaction`, which holds ``fcntl.flock``
on ``ledger.lock``: two schedulers
(the TUI, ``evaltui serve``, a wrapper) never decide on the same free memory. A
reservation whose holder is dead is stale and is purged by the next transaction, so a
crashed scheduler or run never leaks a reservation.

With ``EVALTUI_LEDGER_AUDIT=/path/audit.jsonl`` (or ``audit_path``) every admit, release
and purge is appended, under the lock, as one JSON line with the totals after it.

**Fail closed** (DESIGN §12): a reservation that is not on disk protects nothing, since
every other scheduler (and this one's next transaction) reads the disk. So a run is
spawned only under a *hold* already stored: a reservation of the same size held by the
admitting scheduler itself, written by :meth:`Ledger.flush` before the spawn and replaced
by the run's own reservation in the same transaction. If a store fails (ENOSPC, EROFS,
EACCES...), the hold stays on disk, the failed changes are kept in memory and replayed
over the disk's entries by every later transaction until one stores them, and
:attr:`Ledger.error` says why; the tick admits nothing while it is set.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
from pydantic import ValidationError

from evaltui.rundir import PRIVATE_MODE, write_json_atomic
from evaltui.scheduler import procs
from evaltui.scheduler.admission.ledgerdir import FILE_MODE, ledger_place, say_once
from evaltui.settings import settings
from evaltui.views import LedgerEntry

LEDGER_FILENAME = "ledger.json"
LOCK_FILENAME = "ledger.lock"
_VERSION = 1
UNAUDITED_OPS = frozenset({"hold", "unhold"})
"""A hold is the pre-spawn copy of an admission, not an admission of its own."""

log = logging.getLogger(__name__)


class LedgerNotDurable(OSError):
    """The ledger could not be stored: nothing may be admitted on the strength of it."""


class LedgerTxn:
    """The ledger's entries while its lock is held; changes are written on commit."""

    def __init__(self, entries: dict[str, LedgerEntry]) -> None:
        self._entries = entries
        self.changes: list[tuple[str, LedgerEntry]] = []
        self.stored: list[tuple[str, LedgerEntry]] = []
        """Changes already on disk through :meth:`Ledger.flush`."""

    @property
    def entries(self) -> list[LedgerEntry]:
        return list(self._entries.values())

    def get(self, key: str) -> LedgerEntry | None:
        return self._entries.get(key)

    def add(self, reservation: LedgerEntry) -> None:
        """Record an admission (replacing any entry of the same holder)."""
        self._entries[reservation.key] = reservation
        self.changes.append(("admit", reservation))

    def remove(self, key: str) -> LedgerEntry | None:
        """Release the reservation of a holder; returns it, or None if there was none.

        Another user's reservation is not released (it lives until its holder exits):
        PermissionError."""
        reservation = self._entries.get(key)
        if reservation is None:
            return None
        if not reservation.mine:
            raise PermissionError(f"reservation {key} belongs to uid {reservation.uid}; "
                                  "only its own user releases it")
        del self._entries[key]
        self.changes.append(("release", reservation))
        return reservation

    def hold(self, reservation: LedgerEntry) -> None:
        """Hold memory for an admission about to be spawned (held by the scheduler)."""
        self._entries[reservation.key] = reservation
        self.changes.append(("hold", reservation))

    def unhold(self, key: str) -> None:
        """Drop a hold: its run's own reservation replaces it, or the start failed."""
        reservation = self._entries.pop(key, None)
        if reservation is not None:
            self.changes.append(("unhold", reservation))

    def discard(self, key: str) -> None:
        """Forget an entry added in this transaction that could not be made durable (its
        changes too: it was never admitted, so nothing is to be released)."""
        self._entries.pop(key, None)
        self.changes = [(op, r) for op, r in self.changes if r.key != key]

    def _purge(self, reservation: LedgerEntry) -> None:
        del self._entries[reservation.key]
        self.changes.append(("purge", reservation))

    def _replay(self, changes: list[tuple[str, LedgerEntry]]) -> None:
        """Re-apply changes a failed store left unsaved (on this scheduler's own entries)."""
        for op, reservation in changes:
            if op in ("admit", "hold"):
                self._entries[reservation.key] = reservation
            else:
                self._entries.pop(reservation.key, None)
            self.changes.append((op, reservation))


class Ledger:
    """Reservations shared by every scheduler on this machine (of every user where the
    machine-wide directory is set up, else of this user); ``directory`` overrides it."""

    def __init__(self, directory: Path | None = None, audit_path: Path | None = None) -> None:
        if directory is None:
            place = ledger_place()
            say_once(place)  # the per-user fallback, once per process
            self.directory, self.shared = place.directory, place.shared
        else:
            self.directory, self.shared = Path(directory), False
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / LEDGER_FILENAME
        self.lock_path = self.directory / LOCK_FILENAME
        env_audit = settings().ledger_audit  # EVALTUI_LEDGER_AUDIT
        self.audit_path = audit_path or (Path(env_audit) if env_audit else None)
        self._unsaved: list[tuple[str, LedgerEntry]] = []
        self.error: str | None = None
        """Why the last store failed (nothing is admitted while set); None once one works."""

    @contextmanager
    def transaction(self) -> Iterator[LedgerTxn]:
        """Lock, load (plus what an earlier failed store left unsaved) and purge stale
        entries; write back at the end if anything changed, also after an error in the
        body (a run spawned there must stay reserved). A failed write does not raise: it is
        kept for the next transaction and reported in :attr:`error`."""
        with self._locked(fcntl.LOCK_EX):
            txn = LedgerTxn(self._load())
            txn._replay(self._unsaved)
            for reservation in txn.entries:
                if not procs.alive(reservation.holder_pid, reservation.holder_create_time):
                    txn._purge(reservation)
            try:
                yield txn
            finally:
                if txn.changes:
                    try:
                        self.flush(txn)
                    except LedgerNotDurable:
                        pass  # kept in _unsaved and said in self.error by flush
                else:
                    self._unsaved = []  # what a failed flush kept was discarded since

    def flush(self, txn: LedgerTxn) -> None:
        """Store the transaction's entries now (its lock held): LedgerNotDurable if they
        cannot be, in which case its changes wait in memory for the next store."""
        try:
            self._store(txn)
        except OSError as exc:
            self._unsaved = list(txn.changes)
            reason = f"cannot store the reservation ledger {self.path}: " \
                     f"{exc.strerror or exc}; nothing is admitted until it can be written"
            if self.error is None:
                log.warning("%s", reason)  # once, when it starts failing
            self.error = reason
            raise LedgerNotDurable(exc.errno, reason) from exc
        if self.audit_path is not None:
            self._audit(txn)
        if self.error is not None:
            log.warning("reservation ledger %s stored again; admitting", self.path)
        self._unsaved, self.error = [], None
        txn.stored.extend(txn.changes)
        txn.changes = []

    def flush_new(self, txn: LedgerTxn, key: str) -> None:
        """Store the transaction with the entry ``key`` it has just added or held (fail
        closed): if it cannot be stored, the entry is discarded, never admitted, and
        LedgerNotDurable raised."""
        try:
            self.flush(txn)
        except LedgerNotDurable:
            txn.discard(key)
            raise

    def entries(self) -> list[LedgerEntry]:
        """A consistent read of the current entries (stale ones included until purged),
        with this scheduler's changes that a failed store left unsaved."""
        with self._locked(fcntl.LOCK_SH):
            if not self._unsaved:
                return list(self._load().values())
            txn = LedgerTxn(self._load())
            txn._replay(self._unsaved)
            return txn.entries

    @contextmanager
    def _locked(self, mode: int) -> Iterator[None]:
        if self.shared:
            fd = _open_shared(self.lock_path)
        else:
            try:
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError:
                # A read-only state dir (EROFS): the lock still works on a read-only
                # descriptor, so the transaction runs and fails closed at its store.
                fd = os.open(self.lock_path, os.O_RDONLY)
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            os.close(fd)  # closing the descriptor drops the lock

    def _load(self) -> dict[str, LedgerEntry]:
        try:
            data = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}  # unreadable: every holder re-appears at its scheduler's next admit
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            return {}
        entries: dict[str, LedgerEntry] = {}
        for raw in data.get("entries", {}).values():
            try:
                reservation = LedgerEntry.model_validate(raw)
            except ValidationError:
                continue
            entries[reservation.key] = reservation
        return entries

    def _store(self, txn: LedgerTxn) -> None:
        # No fsync: after a reboot every holder is dead and every entry stale anyway; the
        # rename alone keeps a reader (who holds the lock) from seeing half a file.
        write_json_atomic(self.path, {"version": _VERSION,
                                      "entries": {r.key: r.model_dump() for r in txn.entries}},
                          durable=False, mode=FILE_MODE if self.shared else PRIVATE_MODE,
                          compact=True)
        if self.shared:
            # Under the lock, before any reader: the umask must not hide it from the group
            # (an unreadable ledger would read as empty to the other users).
            os.chmod(self.path, FILE_MODE)

    def _audit(self, txn: LedgerTxn) -> None:
        now = time.time()
        totals: dict[str, int] = {}
        for r in txn.entries:
            totals[str(r.gpu)] = totals.get(str(r.gpu), 0) + r.vram_mb
        lines = b"".join(
            orjson.dumps({"t": now, "op": op, "key": r.key, "run_id": r.run_id, "gpu": r.gpu,
                          "vram_mb": r.vram_mb, "ram_mb": r.ram_mb, "cpus": r.cpus,
                          "exclusive": r.exclusive,
                          "scheduler_pid": r.scheduler_pid, "uid": r.uid,
                          "reserved_after_txn": totals}) + b"\n"
            for op, r in txn.changes if op not in UNAUDITED_OPS
        )
        if lines:
            with open(self.audit_path, "ab") as f:  # type: ignore[arg-type]
                f.write(lines)


def _open_shared(path: Path) -> int:
    """The shared ledger's lock file, made group read-write (whatever the umask); one
    another user made read-only to us still takes a lock (flock needs no write)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        try:
            return os.open(path, os.O_RDWR)
        except PermissionError:
            return os.open(path, os.O_RDONLY)
    os.fchmod(fd, FILE_MODE)
    return fd
