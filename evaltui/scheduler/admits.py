"""Admit entries: queue places for commands that are not eval runs (``evaltui run``).

An admit entry asks for GPU memory on behalf of an external command (a training
script, a notebook kernel, a benchmark someone else wrote). It waits in its own
priority queue and is admitted by the same rules as eval runs (``admission.decide``
over the machine-wide ledger, the interactive lock honoured), so an eval run, a
wrapped command and a run of another scheduler never over-commit one GPU between them.

The reservation it gets is held by a live process: the wrapper while it waits and
starts its command, then the command itself once the wrapper ``bind``s it. The
command leads its own session, so its GPU usage is attributed to the reservation
(accounting.py) instead of being counted twice as a foreign process. When the holder
exits, even by SIGKILL, the ledger purges the reservation as stale; ``release`` drops
it at once.

Entries live in memory only: a restarted backend forgets waiting entries (their
wrappers enqueue again), while admitted ones live on in the ledger until their holder
exits.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from evaltui import fakegpu
from evaltui.rundir import PidRef
from evaltui.scheduler import procs
from evaltui.scheduler.accounting import GpuView, RssCache, account
from evaltui.scheduler.admission import Candidate, Wait, WaitKind, decide
from evaltui.scheduler.ledger import Ledger, Reservation
from evaltui.scheduler.lock import InteractiveLock
from evaltui.scheduler.resources import (
    FakeGpuProbe,
    GpuProbe,
    HostProbe,
    ResourceSnapshot,
    make_gpu_probe,
    visible_gpu_indices,
)

log = logging.getLogger(__name__)

ADMIT_PREFIX = "admit:"
"""Ledger ``run_id`` of an admit entry's reservation: ``admit:{admit_id}``."""


class AdmitState(StrEnum):
    """Where an admit entry is."""

    WAITING = "waiting"
    """Queued; ``waiting_reason`` says why it is not admitted yet."""
    ADMITTED = "admitted"
    """A reservation is held for it; its command may run."""
    RELEASED = "released"
    """Done: released by its holder, or its holder exited (``release_reason``)."""


class AdmitNotFound(KeyError):
    """No admit entry with that id (never was, or released and forgotten)."""


class AdmitError(ValueError):
    """An admit request that cannot be honoured (e.g. the entry was released already)."""


class HolderNotRunning(AdmitError):
    """The process named as holder does not run on this machine."""


@dataclass(frozen=True)
class AdmitInfo:
    """One admit entry as clients see it."""

    admit_id: str
    label: str
    """What asked: the profile name of ``evaltui run``."""
    command: str
    state: AdmitState
    priority: int
    exclusive: bool
    vram_mb: int | None
    """Requested VRAM (MiB); None asks for a whole GPU."""
    reserved_mb: int | None
    """What the reservation holds once admitted."""
    gpu: int | None
    holder_pid: int
    holder_create_time: float
    waiting_reason: str | None
    queued_at: float
    admitted_at: float | None
    released_at: float | None
    release_reason: str | None
    env: dict[str, str]
    """Environment for the command once admitted (``CUDA_VISIBLE_DEVICES`` of its GPU)."""
    version: int
    """Bumped on every change: pass it back to ``wait`` to wait for the next one."""


@dataclass(eq=False)
class _Entry:
    admit_id: str
    label: str
    command: str
    priority: int
    exclusive: bool
    vram_mb: int | None
    holder: PidRef
    seq: int
    queued_at: float = field(default_factory=time.time)
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

    @property
    def ledger_id(self) -> str:
        return f"{ADMIT_PREFIX}{self.admit_id}"

    def sort_key(self) -> tuple[int, float, int]:
        return (-self.priority, self.queued_at, self.seq)


class AdmitQueue:
    """Admit entries of one backend: queue, admission tick, bind and release."""

    def __init__(
        self,
        outputs: str | os.PathLike[str],
        *,
        ledger: Ledger | None = None,
        gpu_probe: GpuProbe | None = None,
        host_probe: HostProbe | None = None,
        interactive_lock: InteractiveLock | None = None,
        tick_interval: float = 0.5,
        claim_after_sec: float = 120.0,
        keep_released_sec: float = 300.0,
    ) -> None:
        self.outputs = str(outputs)
        self._ledger = ledger or Ledger()
        self._gpu_probe = gpu_probe or make_gpu_probe()
        self._fake = isinstance(self._gpu_probe, FakeGpuProbe)
        self._host_probe = host_probe or HostProbe()
        self._ilock = interactive_lock or InteractiveLock()
        self._allowed_gpus = None if self._fake else visible_gpu_indices()
        self.tick_interval = tick_interval
        self.claim_after_sec = claim_after_sec
        self.keep_released_sec = keep_released_sec
        self._listeners: list[Callable[[AdmitInfo], None]] = []
        self._rss = RssCache()
        self._entries: dict[str, _Entry] = {}
        self._seq = 0
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._tick_lock = threading.Lock()
        self._pending: list[AdmitInfo] = []
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self) -> AdmitQueue:
        """Start the admission thread."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="evaltui-admits",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread. Admitted reservations stay in the ledger with their holders."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            self._wake.set()
            thread.join(timeout)
        self._gpu_probe.close()

    def nudge(self) -> None:
        """Tick as soon as possible."""
        self._wake.set()

    def add_listener(self, listener: Callable[[AdmitInfo], None]) -> None:
        """Call ``listener(info)`` (on a queue or request thread) when an entry changes."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[AdmitInfo], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    # ---- requests -----------------------------------------------------------------------
    def add(self, label: str, holder: PidRef, *, vram_mb: int | None, exclusive: bool,
            priority: int = 0, command: str = "") -> AdmitInfo:
        """Queue an entry held by ``holder`` (a live process on this machine)."""
        if not procs.alive(holder.pid, holder.create_time):
            raise HolderNotRunning(f"holder process {holder.pid} (created "
                                   f"{holder.create_time:.3f}) is not running on this machine")
        with self._lock:
            self._seq += 1
            entry = _Entry(secrets.token_hex(6), label, command, priority, exclusive, vram_mb,
                           holder, self._seq)
            self._entries[entry.admit_id] = entry
            info = self._touch(entry)
        self._emit()
        self.nudge()
        return info

    def get(self, admit_id: str) -> AdmitInfo:
        """The entry now (AdmitNotFound if unknown)."""
        with self._lock:
            return _info(self._find(admit_id), self._fake)

    def wait(self, admit_id: str, timeout: float, seen: int | None = None) -> AdmitInfo:
        """The entry once its version differs from ``seen`` (default: its version now),
        or after ``timeout`` seconds."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._changed:
            entry = self._find(admit_id)
            if seen is None:
                seen = entry.version
            while entry.version == seen:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            return _info(entry, self._fake)

    def all(self) -> list[AdmitInfo]:
        """Waiting entries in admission order, then admitted, then recently released."""
        rank = {AdmitState.WAITING: 0, AdmitState.ADMITTED: 1, AdmitState.RELEASED: 2}
        with self._lock:
            entries = sorted(self._entries.values(), key=lambda e: (rank[e.state], e.sort_key()))
            return [_info(e, self._fake) for e in entries]

    def bind(self, admit_id: str, holder: PidRef) -> AdmitInfo:
        """Hand the entry (and its reservation) over to another live process.

        ``evaltui run`` binds its command once started, so that the command's GPU usage
        is set against the reservation and the reservation lives exactly as long as it.
        """
        self.get(admit_id)  # AdmitNotFound first
        if not procs.alive(holder.pid, holder.create_time):
            raise HolderNotRunning(f"process {holder.pid} (created {holder.create_time:.3f}) "
                                   "is not running on this machine")
        error: str | None = None
        with self._ledger.transaction() as txn, self._lock:
            entry = self._find(admit_id)
            if entry.state is AdmitState.ADMITTED and entry.key is not None:
                old = txn.remove(entry.key)
                if old is None:  # purged: its holder died between admission and now
                    self._release(entry, "its holder exited")
                    self._touch(entry)
                else:
                    moved = Reservation(old.run_id, holder.pid, holder.create_time,
                                        old.scheduler_pid, old.outputs, old.gpu, old.vram_mb,
                                        old.ram_mb, old.exclusive, old.admitted_at)
                    txn.add(moved)
                    entry.key = moved.key
            if entry.state is AdmitState.RELEASED:
                error = f"admit entry {admit_id} was released ({entry.release_reason})"
            else:
                entry.holder = holder
                self._touch(entry)
            info = _info(entry, self._fake)
        self._emit()
        if error is not None:
            raise AdmitError(error)
        return info

    def release(self, admit_id: str, reason: str = "released by its holder") -> AdmitInfo:
        """Leave the queue, or drop the reservation; releasing twice is harmless."""
        # Under the ledger lock: the tick admits under it too, so an entry can never be
        # admitted (reserved) between reading its state here and marking it released.
        with self._ledger.transaction() as txn, self._lock:
            entry = self._find(admit_id)
            if entry.state is AdmitState.ADMITTED and entry.key is not None:
                txn.remove(entry.key)
            if entry.state is not AdmitState.RELEASED:
                self._release(entry, reason)
                self._touch(entry)
            info = _info(entry, self._fake)
        self._emit()
        self.nudge()  # what it held may admit the next one
        return info

    # ---- the tick -----------------------------------------------------------------------
    def tick(self) -> None:
        """Forget entries whose holder is gone, then admit what fits."""
        with self._tick_lock:
            self._reap()
            with self._lock:
                waiting = sorted((e for e in self._entries.values()
                                  if e.state is AdmitState.WAITING), key=_Entry.sort_key)
            if waiting:
                held = self._ilock.current()
                if held is not None:
                    with self._lock:
                        for entry in waiting:
                            self._set_wait(entry, Wait(entry.ledger_id, WaitKind.LOCK,
                                                       held.reason))
                else:
                    self._admit(waiting)
        self._emit()

    def _reap(self) -> None:
        now = time.time()
        with self._lock:
            for entry in list(self._entries.values()):
                if entry.state is AdmitState.RELEASED:
                    if now - (entry.released_at or now) > self.keep_released_sec:
                        del self._entries[entry.admit_id]
                elif not procs.alive(entry.holder.pid, entry.holder.create_time):
                    # The ledger purges an admitted entry's reservation by itself.
                    self._release(entry, "its holder exited")
                    self._touch(entry)

    def _admit(self, waiting: list[_Entry]) -> None:
        with self._ledger.transaction() as txn:
            snap = ResourceSnapshot(self._gpu_probe.read(), self._host_probe.read(), time.time())
            acct = account(txn.entries, snap, self._rss)
            gpus = acct.gpus
            if gpus is not None and self._allowed_gpus is not None:
                gpus = tuple(g for g in gpus if g.index in self._allowed_gpus)
            views = {g.index: g for g in gpus or ()}
            candidates = [Candidate(e.ledger_id, e.vram_mb or 0, 0, e.exclusive,
                                    needs_gpu=e.exclusive or bool(e.vram_mb),
                                    waiting_since=e.queued_at) for e in waiting]
            admits, waits = decide(candidates, gpus, acct.host, now=time.time(),
                                   claim_after_sec=self.claim_after_sec)
            by_id = {e.ledger_id: e for e in waiting}
            with self._lock:
                for admit in admits:
                    entry = by_id[admit.run_id]
                    if entry.state is not AdmitState.WAITING:
                        continue  # released while this tick decided
                    mb = _reserve_mb(entry, views.get(admit.gpu) if admit.gpu is not None
                                     else None)
                    reservation = Reservation(entry.ledger_id, entry.holder.pid,
                                              entry.holder.create_time, os.getpid(),
                                              self.outputs, admit.gpu, mb, 0, entry.exclusive,
                                              time.time())
                    txn.add(reservation)
                    entry.state, entry.gpu, entry.reserved_mb = (AdmitState.ADMITTED,
                                                                 admit.gpu, mb)
                    entry.key, entry.admitted_at, entry.wait = reservation.key, time.time(), None
                    self._touch(entry)
                for run_id, wait in waits.items():
                    self._set_wait(by_id[run_id], wait)

    # ---- helpers ------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # the loop must outlive any one bad tick
                log.exception("admit tick failed")
            self._wake.wait(self.tick_interval)
            self._wake.clear()

    def _find(self, admit_id: str) -> _Entry:
        entry = self._entries.get(admit_id)
        if entry is None:
            raise AdmitNotFound(admit_id)
        return entry

    def _release(self, entry: _Entry, reason: str) -> None:
        entry.state, entry.released_at, entry.release_reason = (AdmitState.RELEASED, time.time(),
                                                                reason)
        entry.wait, entry.key = None, None

    def _set_wait(self, entry: _Entry, wait: Wait) -> None:
        if entry.wait is None or entry.wait.reason != wait.reason:
            entry.wait = wait
            self._touch(entry)

    def _touch(self, entry: _Entry) -> AdmitInfo:
        """Record a change (lock held): wake waiters, queue the event."""
        entry.version += 1
        info = _info(entry, self._fake)
        self._pending.append(info)
        self._changed.notify_all()
        return info

    def _emit(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
            listeners = list(self._listeners)
        for info in pending:
            for listener in listeners:
                try:
                    listener(info)
                except Exception:  # a listener never stops the queue
                    log.exception("admit listener failed on %s", info.admit_id)


def _reserve_mb(entry: _Entry, view: GpuView | None) -> int:
    """What to hold: the request, or for a whole GPU what it has free after reservations."""
    if entry.vram_mb is not None:
        return entry.vram_mb
    return max(0, view.available_mb) if view is not None else 0


def _reason(entry: _Entry) -> str | None:
    if entry.state is not AdmitState.WAITING:
        return None
    return entry.wait.reason if entry.wait is not None else "queued: admission at the next tick"


def _info(entry: _Entry, fake: bool) -> AdmitInfo:
    env: dict[str, str] = {}
    if entry.state is AdmitState.ADMITTED and entry.gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(entry.gpu)
        if fake:
            env[fakegpu.FAKE_GPU_INDEX_ENV] = str(entry.gpu)
        else:
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # NVML numbers GPUs in PCI order
    return AdmitInfo(
        admit_id=entry.admit_id, label=entry.label, command=entry.command, state=entry.state,
        priority=entry.priority, exclusive=entry.exclusive, vram_mb=entry.vram_mb,
        reserved_mb=entry.reserved_mb, gpu=entry.gpu, holder_pid=entry.holder.pid,
        holder_create_time=entry.holder.create_time,
        waiting_reason=_reason(entry),
        queued_at=entry.queued_at, admitted_at=entry.admitted_at,
        released_at=entry.released_at, release_reason=entry.release_reason, env=env,
        version=entry.version)

