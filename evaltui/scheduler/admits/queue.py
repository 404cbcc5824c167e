"""Admit entries: queue places for commands that are not eval runs (``evaltui run``).

An admit entry asks for GPU memory on behalf of an external command (a training
script, a notebook kernel, a benchmark someone else wrote). It is a candidate of the
scheduler's own tick (ticking.py), beside the eval runs: one resource probe, one ledger
transaction, one queue order (priority, then age) and one starvation rule
(``admission.decide``) for both, so a wrapped command and an eval run take turns by
priority and never over-commit a GPU between them, nor with other backends.

The reservation it gets is held by a live process: the wrapper while it waits and
starts its command, then the command itself once the wrapper ``bind``s it. The
command leads its own session, so its GPU usage is attributed to the reservation
(admission/accounting.py) instead of being counted twice as a foreign process. When the holder
exits, even by SIGKILL, the ledger purges the reservation as stale; ``release`` drops
it at once.

Entries not yet released persist in the state dir (entry.py) and are owned like
runs (ownership.py): a backend restarted on the same outputs root takes over the
entries of the one that died, waiting ones in their order, so their wrappers keep
their place.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from evaltui.contract.pidref import PidRef
from evaltui.contract.views import Admit
from evaltui.scheduler import procs
from evaltui.scheduler.admission.accounting import GpuView
from evaltui.scheduler.admission.decision import Wait
from evaltui.scheduler.admission.ledger import LedgerTxn
from evaltui.scheduler.admits.entry import (
    ADMIT_PREFIX,
    AdmitState,
    AdmitStore,
    Entry,
    entry_from,
)
from evaltui.scheduler.core import Core
from evaltui.scheduler.events import Listeners
from evaltui.scheduler.runs.ownership import owner_alive

__all__ = ["ADMIT_PREFIX", "AdmitError", "AdmitNotFound", "AdmitQueue", "AdmitState",
           "HolderNotRunning"]

log = logging.getLogger(__name__)

KEEP_RELEASED_SEC = 300.0
"""How long a released entry is still listed (its wrapper reads why it ended)."""


class AdmitNotFound(KeyError):
    """No admit entry with that id (never was, or released and forgotten)."""


class AdmitError(ValueError):
    """An admit request that cannot be honoured (e.g. the entry was released already)."""


class HolderNotRunning(AdmitError):
    """The process named as holder does not run on this machine."""


class AdmitQueue:
    """The admit entries of one scheduler: requests (any thread), and what its tick needs."""

    def __init__(self, core: Core, store: AdmitStore | None = None) -> None:
        self.core = core
        self.store = store or AdmitStore()
        self.keep_released_sec = KEEP_RELEASED_SEC
        self._entries: dict[str, Entry] = {}
        self._listeners: Listeners[Admit] = Listeners()
        self._pending: list[Admit] = []

    def nudge(self) -> None:
        """Tick as soon as possible."""
        self.core.nudge()

    def add_listener(self, listener: Callable[[Admit], None]) -> None:
        """Call ``listener(info)`` (on a scheduler or request thread) when an entry changes."""
        self._listeners.add(listener)

    def remove_listener(self, listener: Callable[[Admit], None]) -> None:
        self._listeners.remove(listener)

    # ---- requests -----------------------------------------------------------------------
    def add(self, label: str, holder: PidRef, *, vram_mb: int | None, exclusive: bool,
            priority: int = 0, command: str = "", cpus: float = 0.0,
            kind: str = "run", ram_mb: int = 0) -> Admit:
        """Queue an entry held by ``holder`` (a live process on this machine); ``kind``
        ``serve``: an ``evaltui serve-policy`` holding its own entry."""
        _check_holder(holder, "holder process")
        c = self.core
        with c.lock:
            entry = Entry(label, command, priority, exclusive, vram_mb, holder, c.next_seq(),
                          time.time(), cpus=cpus, kind=kind, ram_mb=ram_mb)
            self._entries[entry.admit_id] = entry
            self._save(entry)
            info = self._touch(entry)
        self.emit()
        c.nudge()
        return info

    def get(self, admit_id: str) -> Admit:
        """The entry now (AdmitNotFound if unknown)."""
        with self.core.lock:
            return self._find(admit_id).info(self.core.fake)

    def wait(self, admit_id: str, timeout: float, seen: int | None = None) -> Admit:
        """The entry once its version differs from ``seen`` (default: its version now),
        or after ``timeout`` seconds."""
        deadline = time.monotonic() + max(0.0, timeout)
        changed = self.core.changed
        with changed:
            entry = self._find(admit_id)
            if seen is None:
                seen = entry.version
            while entry.version == seen:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                changed.wait(left)
            return entry.info(self.core.fake)

    def all(self) -> list[Admit]:
        """Waiting entries in admission order, then admitted, then recently released."""
        rank = {AdmitState.WAITING: 0, AdmitState.ADMITTED: 1, AdmitState.RELEASED: 2}
        with self.core.lock:
            entries = sorted(self._entries.values(), key=lambda e: (rank[e.state], e.sort_key()))
            return [e.info(self.core.fake) for e in entries]

    def bind(self, admit_id: str, holder: PidRef) -> Admit:
        """Hand the entry (and its reservation) over to another live process.

        ``evaltui run`` binds its command once started, so that the command's GPU usage
        is set against the reservation and the reservation lives exactly as long as it.
        """
        self.get(admit_id)  # AdmitNotFound first
        _check_holder(holder, "process")
        c = self.core
        error: str | None = None
        with c.ledger.transaction() as txn, c.lock:
            entry = self._find(admit_id)
            if entry.state is AdmitState.ADMITTED and entry.key is not None:
                old = txn.remove(entry.key)
                if old is None:  # purged: its holder died between admission and now
                    self._release(entry, "its holder exited")
                else:
                    moved = old.model_copy(update={"holder_pid": holder.pid,
                                                   "holder_create_time": holder.create_time})
                    txn.add(moved)
                    entry.key = moved.key
            if entry.state is AdmitState.RELEASED:
                error = f"admit entry {admit_id} was released ({entry.release_reason})"
            else:
                entry.holder = holder
                self._save(entry)
                self._touch(entry)
            info = entry.info(c.fake)
        self.emit()
        if error is not None:
            raise AdmitError(error)
        return info

    def serving(self, admit_id: str, url: str, requests_served: int) -> Admit:
        """A serving entry's report (``evaltui serve-policy``, every few seconds): where it
        listens and what it answered. A changed count is a new version (listeners hear
        it); the answer says whether the entry was released meanwhile (cancelled)."""
        with self.core.lock:
            entry = self._find(admit_id)
            if entry.state is not AdmitState.RELEASED and \
                    (entry.url, entry.requests_served) != (url, requests_served):
                entry.url, entry.requests_served = url, requests_served
                self._save(entry)
                self._touch(entry)
            info = entry.info(self.core.fake)
        self.emit()
        return info

    def release(self, admit_id: str, reason: str = "released by its holder") -> Admit:
        """Leave the queue, or drop the reservation; releasing twice is harmless."""
        c = self.core
        # Under the ledger lock: the tick admits under it too, so an entry can never be
        # admitted (reserved) between reading its state here and marking it released.
        with c.ledger.transaction() as txn, c.lock:
            entry = self._find(admit_id)
            if entry.state is AdmitState.ADMITTED and entry.key is not None:
                txn.remove(entry.key)
            if entry.state is not AdmitState.RELEASED:
                self._release(entry, reason)
            info = entry.info(c.fake)
        self.emit()
        c.nudge()  # what it held may admit the next one
        return info

    # ---- for the tick (ticking.py) ------------------------------------------------------
    def waiting(self) -> list[Entry]:
        """Waiting entries in queue order (lock held)."""
        return sorted((e for e in self._entries.values() if e.state is AdmitState.WAITING),
                      key=Entry.sort_key)

    def reap(self) -> None:
        """Release entries whose holder is gone; forget long-released ones."""
        now = time.time()
        with self.core.lock:
            for entry in list(self._entries.values()):
                if entry.state is AdmitState.RELEASED:
                    if now - (entry.released_at or now) > self.keep_released_sec:
                        del self._entries[entry.admit_id]
                elif not procs.alive(entry.holder.pid, entry.holder.create_time):
                    # The ledger purges an admitted entry's reservation by itself.
                    self._release(entry, "its holder exited")

    def set_wait(self, entry: Entry, wait: Wait) -> None:
        """Why the entry waits (lock held); a change of reason is a new version."""
        if entry.wait is None or entry.wait.reason != wait.reason:
            entry.wait = wait
            self._touch(entry)

    def grant(self, entry: Entry, gpu: int | None, view: GpuView | None,
              txn: LedgerTxn) -> None:
        """Admit the entry on ``gpu`` (ledger lock and core lock held): reserve for it.

        The reservation is stored before the entry is told (fail closed): LedgerNotDurable,
        with the entry still waiting, if it cannot be."""
        c = self.core
        # What to hold: the request, or for a whole GPU what it has free after reservations.
        mb = entry.vram_mb if entry.vram_mb is not None else \
            max(0, view.available_mb) if view is not None else 0
        reservation = c.ledger_entry(entry.ledger_id, entry.holder, gpu=gpu, vram_mb=mb,
                                     ram_mb=entry.ram_mb, exclusive=entry.exclusive,
                                     cpus=entry.cpus)
        txn.add(reservation)
        c.ledger.flush_new(txn, reservation.key)
        entry.state, entry.gpu, entry.reserved_mb = AdmitState.ADMITTED, gpu, mb
        entry.key, entry.admitted_at, entry.wait = reservation.key, time.time(), None
        self._save(entry)
        self._touch(entry)

    def claim_orphans(self) -> None:
        """Take over the entries of this outputs root whose backend died (at start, then
        every few seconds), under the ledger lock: of several backends, one wins each."""
        c = self.core
        if not any(map(self._claimable, self.store.load_all())):
            return  # the common case: no ledger lock taken
        with c.ledger.transaction() as txn, c.lock:
            found = []
            held = {e.holder for e in self._entries.values()
                    if e.state is not AdmitState.RELEASED}
            for data in filter(self._claimable, self.store.load_all()):
                entry = entry_from(data, 0)
                if entry is None or not entry.holder.alive() or entry.holder in held:
                    # Its wrapper is gone too, or it queued again here meanwhile.
                    self.store.remove(str(data["admit_id"]))
                    continue
                if entry.state is AdmitState.ADMITTED and (entry.key is None
                                                           or txn.get(entry.key) is None):
                    self.store.remove(entry.admit_id)  # nothing reserved for it any more
                    continue
                found.append(entry)
            for entry in sorted(found, key=lambda e: (-e.priority, e.queued_at)):
                entry.seq = c.next_seq()
                self._entries[entry.admit_id] = entry
                self._save(entry)
                self._touch(entry)
                log.info("took over admit entry %s (%s)", entry.admit_id, entry.state.value)
        self.emit()

    def emit(self) -> None:
        """Hand the changes recorded so far to the listeners (no lock held)."""
        with self.core.lock:
            pending, self._pending = self._pending, []
        for info in pending:
            self._listeners.emit(info)  # a listener that fails is logged, never stops it

    # ---- helpers ------------------------------------------------------------------------
    def _claimable(self, data: dict[str, Any]) -> bool:
        """An entry file of this outputs root that no live backend (but this one) owns."""
        owner = data.get("owner")
        return (data.get("outputs") == str(self.core.outputs)
                and data["admit_id"] not in self._entries
                and (owner == str(self.core.owner) or not owner_alive(owner)))

    def _find(self, admit_id: str) -> Entry:
        entry = self._entries.get(admit_id)
        if entry is None:
            raise AdmitNotFound(admit_id)
        return entry

    def _release(self, entry: Entry, reason: str) -> None:
        entry.release(reason, time.time())
        self.store.remove(entry.admit_id)
        self._touch(entry)

    def _save(self, entry: Entry) -> None:
        self.store.save(entry, str(self.core.owner), str(self.core.outputs))

    def _touch(self, entry: Entry) -> Admit:
        """Record a change (lock held): wake waiters, queue the event."""
        entry.version += 1
        info = entry.info(self.core.fake)
        self._pending.append(info)
        self.core.changed.notify_all()
        return info


def _check_holder(holder: PidRef, what: str) -> None:
    if not procs.alive(holder.pid, holder.create_time):
        raise HolderNotRunning(f"{what} {holder.pid} (created {holder.create_time:.3f}) "
                               "is not running on this machine")
