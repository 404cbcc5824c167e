"""The backend's sets: one thread per running set, stepping its SetRunner over the
backend's own scheduler, and an SSE ``set`` event per member state change.

A :class:`SetDriver` holds the set dir (``setdir.hold_set``: a ``set run`` of the same
set elsewhere is refused while it runs, and the other way round) and steps a
:class:`~evaltui.sets.runner.SetRunner` whose target is the server's scheduler
(``EmbeddedTarget(scheduler)``, left running on close) until every member is settled.
After a cancel it only *follows*: it reads its members' runs until each has ended, so a
member cancelled while it ran is never retried by the runner, and set.json ends with
the members' final states. :class:`SetDrivers` owns every driver of one app: it starts
them, refuses a second one for the same set, and stops them all when the app shuts down.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import ExitStack, suppress
from typing import Any

from evaltui.contract.setspec import SetMemberRecord
from evaltui.scheduler.scheduler import JobScheduler
from evaltui.sets.dispatch import read_ends
from evaltui.sets.plan import SetPlan
from evaltui.sets.runner import RunnerOptions, SetRunner
from evaltui.sets.setdir import SetBusy, hold_set, read_set, write_set
from evaltui.sets.targets import EmbeddedTarget

log = logging.getLogger(__name__)

Publish = Callable[[str, dict[str, Any]], None]


def member_event(set_id: str, rec: SetMemberRecord, previous: str | None) -> dict[str, Any]:
    """The payload of a ``set`` SSE event (one member's state changed)."""
    return {"set_id": set_id, "key": rec.key, "axes": rec.axes, "run_id": rec.run_id,
            "state": rec.state.value, "previous": previous, "attempts": rec.attempts,
            "error": rec.error}


class SetDriver:
    """One set driven (or followed) by a thread of the backend."""

    def __init__(self, plan: SetPlan, scheduler: JobScheduler, options: RunnerOptions,
                 publish: Publish, on_end: Callable[[SetDriver], None]) -> None:
        self.plan = plan
        self.set_id = plan.set_id
        self.scheduler = scheduler
        self.publish = publish
        self._on_end = on_end
        self._stop = threading.Event()
        self._following = threading.Event()
        self._step_lock = threading.Lock()
        """Held over each step: ``follow_only`` waits for the step under way."""
        self._seen: dict[str, str] = {}
        self._stack = ExitStack()
        self._stack.enter_context(hold_set(plan.path))  # SetBusy: someone runs it already
        self.runner = SetRunner(plan.expansion, plan.path, EmbeddedTarget(scheduler),
                                set_id=plan.set_id, options=options,
                                on_change=lambda _lives: self._announce())
        self._thread: threading.Thread | None = None
        self.first_members: list[SetMemberRecord] = []
        """The members as :meth:`start` left them (what the create/resume answers say)."""

    @property
    def held(self) -> bool:
        """True once ``max_error_rate`` stopped the submitting."""
        return self.runner.held

    def start(self, *, follow: bool = False) -> list[SetMemberRecord]:
        """Write set.json (the members as they stand: new ones pending), then submit and
        follow in a thread of its own, so that the caller answers at once (a set of 200
        members takes a minute to submit). ``follow``: submit nothing, only follow the
        runs set.json names (after a cancel). Returns a copy of the members."""
        try:
            if follow:
                self._following.set()
                self.runner.record = read_set(self.plan.path)
                for rec in self.runner.record.members:
                    self._seen[rec.key] = rec.state.value
            else:
                self.runner.prepare(self.plan.file)
                self._announce()
        except BaseException:
            self._stack.close()
            raise
        assert self.runner.record is not None
        members = self.first_members = [m.model_copy() for m in self.runner.record.members]
        self._thread = threading.Thread(target=self._loop, name=f"set-{self.set_id}",
                                        daemon=True)
        self._thread.start()
        return members

    def follow_only(self) -> None:
        """Stop submitting and retrying (once the step under way has ended); keep reading
        the members until they end."""
        with self._step_lock:
            self._following.set()

    def stop(self, timeout: float = 10.0) -> None:
        """End the thread (runs go on: the scheduler owns them)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _loop(self) -> None:
        poll = self.runner.options.poll_sec
        try:
            while not self._stop.is_set():
                with self._step_lock:
                    if self._following.is_set():
                        done = self._follow()
                    else:
                        self.runner.step()
                        done = self.runner.settled()
                if done:
                    break
                self._stop.wait(poll)
        except Exception:  # a crash must free the set dir; the next resume reads it back
            log.exception("set %s: driver failed", self.set_id)
        finally:
            self._stack.close()
            self._on_end(self)

    def _follow(self) -> bool:
        """Read every unfinished member's run; True once none is left."""
        record = self.runner.record
        assert record is not None
        if read_ends(record, self.runner.target):
            write_set(self.plan.path, record)
            self._announce()
        return all(rec.run_id is None or rec.state.finished for rec in record.members)

    def _announce(self) -> None:
        record = self.runner.record
        if record is None:
            return
        for rec in record.members:
            previous = self._seen.get(rec.key)
            if previous != rec.state.value:
                self._seen[rec.key] = rec.state.value
                self.publish("set", member_event(self.set_id, rec, previous))


class SetBusyHere(RuntimeError):
    """This backend drives the set already."""


class SetDrivers:
    """Every set this backend drives."""

    def __init__(self, scheduler: JobScheduler, publish: Publish) -> None:
        self.scheduler = scheduler
        self.publish = publish
        self._lock = threading.Lock()
        self._drivers: dict[str, SetDriver] = {}
        self._closed = False

    def running(self, set_id: str) -> bool:
        with self._lock:
            return set_id in self._drivers

    def get(self, set_id: str) -> SetDriver | None:
        with self._lock:
            return self._drivers.get(set_id)

    def run(self, plan: SetPlan, options: RunnerOptions, *, follow: bool = False
            ) -> SetDriver:
        """Start driving (``follow``: following) ``plan``; SetBusyHere if this backend
        drives it already, SetBusy if another process does."""
        with self._lock:
            if self._closed:
                raise SetBusyHere("the backend is shutting down")
            if plan.set_id in self._drivers:
                raise SetBusyHere(f"set {plan.set_id} is running on this backend already")
            driver = SetDriver(plan, self.scheduler, options, self.publish, self._ended)
            self._drivers[plan.set_id] = driver
        try:
            driver.start(follow=follow)
        except BaseException:
            with self._lock:
                self._drivers.pop(plan.set_id, None)
            raise
        return driver

    def cancel(self, plan: SetPlan) -> int:
        """Cancel every queued or running member's run; how many were asked. A driver of
        the set stops submitting and follows the cancelled runs to their end."""
        driver = self.get(plan.set_id)
        if driver is not None:
            driver.follow_only()
            return driver.runner.cancel()
        runner = SetRunner(plan.expansion, plan.path, EmbeddedTarget(self.scheduler),
                           set_id=plan.set_id)
        runner.record = read_set(plan.path)
        asked = runner.cancel()
        if asked:  # follow them so that set.json and the events see them end
            # its runner (a `set run` elsewhere) sees the cancel itself
            with suppress(SetBusy, SetBusyHere):
                self.run(plan, RunnerOptions(), follow=True)
        return asked

    def _ended(self, driver: SetDriver) -> None:
        with self._lock:
            if self._drivers.get(driver.set_id) is driver:
                del self._drivers[driver.set_id]

    def close(self) -> None:
        """Stop every driver (the app shuts down); their runs go on."""
        with self._lock:
            self._closed = True
            drivers = list(self._drivers.values())
        for driver in drivers:
            driver.stop()
