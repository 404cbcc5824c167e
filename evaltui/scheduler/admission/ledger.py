"""The machine-wide reservation ledger: what every scheduler on this machine has admitted.

The ledger directory (the machine-wide one shared by every Unix user's schedulers;
ledgerdir.py, else the per-user state dir) holds one reservation per admitted run (or
hosted nodeset), each in its writer's own file, owned by it (ledgerfiles.py: the kernel
says whose an entry is, so a user changes only their own); anyone reads all of them, and
a dead holder's entry is not counted by anyone and purged by its owner. Entries are keyed
by their holder process (PID and create time) and run id. Every read-decide-write goes
through :meth:`Ledger.transaction`, which holds ``ledger.lock`` (waiting at most
:data:`~evaltui.scheduler.admission.ledgerfiles.LOCK_WAIT_SEC`): two schedulers (the TUI,
``evaltui serve``, a wrapper, another user's) never decide on the same free memory. A
transaction that cannot get the lock, or finds a ledger file damaged, is *blocked*: it stores
nothing and the tick admits nothing, saying why (:attr:`Ledger.error`).

With ``EVALTUI_LEDGER_AUDIT=/path/audit.jsonl`` (or ``audit_path``) every admit, release
and purge is appended, under the lock, as one JSON line with the totals after it.

**Fail closed** (DESIGN §12): a reservation that is not on disk protects nothing, since
every other scheduler (and this one's next transaction) reads the disk. So a run is
spawned only under a *hold* already stored: a reservation of the same size held by the
admitting scheduler itself, written by :meth:`Ledger.flush` before the spawn and replaced
by the run's own reservation in the same transaction. If a store fails (ENOSPC, EROFS,
EACCES, a blocked transaction...), the hold stays on disk, the failed changes are kept in
memory and replayed over the disk's entries by every later transaction until one stores
them, and :attr:`Ledger.error` says why; the tick admits nothing while it is set.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import orjson

from evaltui.contract.settings import settings
from evaltui.contract.views import LedgerEntry
from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.rundir.layout import PRIVATE_MODE
from evaltui.scheduler import procs
from evaltui.scheduler.admission.ledgerdir import FILE_MODE, ledger_place, say_once
from evaltui.scheduler.admission.ledgerfiles import (
    LOCK_FILENAME,
    LOCK_WAIT_SEC,
    OWN_LOCK_WAIT_SEC,
    VERSION,
    bounded_flock,
    entry_filename,
    own_lock_filename,
    read_ledger,
)

UNAUDITED_OPS = frozenset({"hold", "unhold"})
"""A hold is the pre-spawn copy of an admission, not an admission of its own."""

log = logging.getLogger(__name__)


class LedgerNotDurable(OSError):
    """The ledger could not be stored: nothing may be admitted on the strength of it."""


class LedgerTxn:
    """The ledger's entries while its lock is held; changes are written on commit."""

    def __init__(self, entries: dict[str, LedgerEntry], blocked: str | None = None) -> None:
        self._entries = entries
        self.blocked = blocked
        """Why nothing may be stored or admitted in this transaction (the lock is held
        elsewhere, a ledger file is damaged); None when it may."""
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
            self.directory, self.shared, self.note = place.directory, place.shared, place.note
        else:
            self.directory, self.shared, self.note = Path(directory), False, None
        self.directory.mkdir(parents=True, exist_ok=True)
        self.uid = os.getuid()
        self.path = self.directory / entry_filename(self.uid)
        """This user's entry file (the only one it writes)."""
        self.lock_path = self.directory / LOCK_FILENAME
        env_audit = settings().ledger_audit  # EVALTUI_LEDGER_AUDIT
        self.audit_path = audit_path or (Path(env_audit) if env_audit else None)
        self._unsaved: list[tuple[str, LedgerEntry]] = []
        self._said_forged: set[str] = set()
        self.error: str | None = None
        """Why the last store failed or the last transaction was blocked (nothing is
        admitted while set); None once one works."""

    @contextmanager
    def transaction(self) -> Iterator[LedgerTxn]:
        """Lock, load (plus what an earlier failed store left unsaved) and purge stale
        entries; write back at the end if anything changed, also after an error in the
        body (a run spawned there must stay reserved). A failed write does not raise: it is
        kept for the next transaction and reported in :attr:`error`. The locks are waited
        for at most a second or so: a blocked transaction runs its body, stores nothing and
        admits nothing (:attr:`LedgerTxn.blocked`)."""
        # Shared mode: the lock must be the directory owner's (set up by root), since a
        # lock file's owner could swap it for another and split the lock.
        owner = self.directory.stat().st_uid if self.shared else None
        with bounded_flock(self.lock_path, wait_sec=LOCK_WAIT_SEC, owner=owner,
                           create_mode=None if self.shared and owner != self.uid
                           else (FILE_MODE if self.shared else PRIVATE_MODE)) as busy, \
                bounded_flock(self.directory / own_lock_filename(self.uid), owner=self.uid,
                              wait_sec=OWN_LOCK_WAIT_SEC, create_mode=PRIVATE_MODE) as own:
            txn = self._read(busy or own)
            txn._replay(self._unsaved)
            for reservation in txn.entries:
                if reservation.uid == self.uid and not procs.alive(
                        reservation.holder_pid, reservation.holder_create_time):
                    txn._purge(reservation)
            if txn.blocked is not None:
                self._fail(txn, txn.blocked)
            try:
                yield txn
            finally:
                if txn.changes:
                    # not durable: kept in _unsaved and said in self.error by flush
                    with suppress(LedgerNotDurable):
                        self.flush(txn)
                elif txn.blocked is None:
                    self._unsaved = []  # what a failed flush kept was discarded since

    def _read(self, blocked: str | None) -> LedgerTxn:
        read = read_ledger(self.directory, self.uid)
        for forged in read.forged:
            if forged not in self._said_forged:
                self._said_forged.add(forged)
                log.warning("reservation ledger: not counted: %s", forged)
        if read.damage:
            blocked = blocked or ("damaged reservation ledger: " + "; ".join(read.damage)
                                  + "; admitting nothing until it is fixed")
        return LedgerTxn(read.entries, blocked)

    def _fail(self, txn: LedgerTxn, reason: str) -> None:
        self._unsaved = list(txn.changes)
        if self.error != reason:
            log.warning("%s", reason)  # once, when it starts failing (or why changes)
        self.error = reason

    def flush(self, txn: LedgerTxn) -> None:
        """Store the transaction's entries now (its lock held): LedgerNotDurable if they
        cannot be, in which case its changes wait in memory for the next store."""
        if txn.blocked is not None:
            self._fail(txn, txn.blocked)
            raise LedgerNotDurable(errno.EAGAIN, txn.blocked)
        try:
            self._store(txn)
        except OSError as exc:
            reason = f"cannot store the reservation ledger {self.path}: " \
                     f"{exc.strerror or exc}; nothing is admitted until it can be written"
            self._fail(txn, reason)
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
        """The current entries (this user's stale ones included until purged), with this
        scheduler's changes that a failed store left unsaved. No lock: every file is
        replaced whole, so a read never waits for a writer (of this or another user)."""
        txn = self._read(None)
        if self._unsaved:
            txn._replay(self._unsaved)
        return txn.entries

    def _store(self, txn: LedgerTxn) -> None:
        # No fsync: after a reboot every holder is dead and every entry stale anyway; the
        # rename alone keeps a reader from seeing half a file. Only this user's entries:
        # the others' are in their files, which this user cannot (and must not) write.
        mine = [r.model_dump() for r in txn.entries if r.uid in (None, self.uid)]
        write_json_atomic(self.path, {"version": VERSION, "entries": mine},
                          durable=False, mode=FILE_MODE if self.shared else PRIVATE_MODE,
                          compact=True)
        if self.shared:
            # The umask must not hide it from the group (it would read as missing).
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

