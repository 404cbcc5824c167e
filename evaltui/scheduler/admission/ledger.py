"""The machine-wide reservation ledger: what every scheduler on this machine has admitted.

``state_dir()/ledger.json`` holds one reservation per admitted run (or hosted nodeset),
keyed by its holder process (PID and create time) and run id. Every read-decide-write goes through
:meth:`Ledger.transaction`, which holds ``fcntl.flock`` on ``ledger.lock``: two schedulers
(the TUI, ``evaltui serve``, a wrapper) never decide on the same free memory. A
reservation whose holder is dead is stale and is purged by the next transaction, so a
crashed scheduler or run never leaks a reservation.

With ``EVALTUI_LEDGER_AUDIT=/path/audit.jsonl`` (or ``audit_path``) every admit, release
and purge is appended, under the lock, as one JSON line with the totals after it.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
from pydantic import ValidationError

from evaltui.rundir import PRIVATE_MODE, state_dir, write_json_atomic
from evaltui.scheduler import procs
from evaltui.settings import settings
from evaltui.views import LedgerEntry

LEDGER_FILENAME = "ledger.json"
LOCK_FILENAME = "ledger.lock"
_VERSION = 1


class LedgerTxn:
    """The ledger's entries while its lock is held; changes are written on commit."""

    def __init__(self, entries: dict[str, LedgerEntry]) -> None:
        self._entries = entries
        self.changes: list[tuple[str, LedgerEntry]] = []

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
        """Release the reservation of a holder; returns it, or None if there was none."""
        reservation = self._entries.pop(key, None)
        if reservation is not None:
            self.changes.append(("release", reservation))
        return reservation

    def _purge(self, reservation: LedgerEntry) -> None:
        del self._entries[reservation.key]
        self.changes.append(("purge", reservation))


class Ledger:
    """LedgerEntrys shared by every scheduler of this user on this machine."""

    def __init__(self, directory: Path | None = None, audit_path: Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else state_dir()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / LEDGER_FILENAME
        self.lock_path = self.directory / LOCK_FILENAME
        env_audit = settings().ledger_audit  # EVALTUI_LEDGER_AUDIT
        self.audit_path = audit_path or (Path(env_audit) if env_audit else None)

    @contextmanager
    def transaction(self) -> Iterator[LedgerTxn]:
        """Lock, load and purge stale entries; write back on a clean exit if anything changed."""
        with self._locked(fcntl.LOCK_EX):
            txn = LedgerTxn(self._load())
            for reservation in txn.entries:
                if not procs.alive(reservation.holder_pid, reservation.holder_create_time):
                    txn._purge(reservation)
            try:
                yield txn
            finally:
                # Also after an error in the body: a run spawned there must stay reserved.
                if txn.changes:
                    self._store(txn)

    def entries(self) -> list[LedgerEntry]:
        """A consistent read of the current entries (stale ones included until purged)."""
        with self._locked(fcntl.LOCK_SH):
            return list(self._load().values())

    @contextmanager
    def _locked(self, mode: int) -> Iterator[None]:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
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
                          durable=False, mode=PRIVATE_MODE, compact=True)
        if self.audit_path is not None:
            self._audit(txn)

    def _audit(self, txn: LedgerTxn) -> None:
        now = time.time()
        totals: dict[str, int] = {}
        for r in txn.entries:
            totals[str(r.gpu)] = totals.get(str(r.gpu), 0) + r.vram_mb
        lines = b"".join(
            orjson.dumps({"t": now, "op": op, "key": r.key, "run_id": r.run_id, "gpu": r.gpu,
                          "vram_mb": r.vram_mb, "ram_mb": r.ram_mb, "exclusive": r.exclusive,
                          "scheduler_pid": r.scheduler_pid, "reserved_after_txn": totals}) + b"\n"
            for op, r in txn.changes
        )
        with open(self.audit_path, "ab") as f:  # type: ignore[arg-type]
            f.write(lines)
