"""Admit entries: candidates of the scheduler's tick, admitted over the machine-wide ledger
like eval runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from apihelpers import Backend, bot_spec, wait_until

from evaltui.contract.pidref import PidRef
from evaltui.contract.states import RunState
from evaltui.scheduler.admission.ledger import Ledger
from evaltui.scheduler.admits.queue import AdmitError, AdmitQueue, AdmitState, HolderNotRunning
from evaltui.scheduler.lock import InteractiveLock
from evaltui.scheduler.scheduler import JobScheduler

GIB = 1024


@pytest.fixture
def queue(api_env: dict) -> Iterator[AdmitQueue]:
    """The admit entries of a ticking scheduler (no API)."""
    sched = JobScheduler(tick_interval=0.05, probe_interval=0.05).start()
    yield sched.admits
    sched.stop()


@pytest.fixture
def holder(popen: Callable[..., subprocess.Popen[Any]]) -> Callable[[], PidRef]:
    def start() -> PidRef:
        proc = popen([sys.executable, "-c", "import time; time.sleep(60)"])
        return PidRef.of(proc.pid)

    return start


def _state(q: AdmitQueue, admit_id: str, state: AdmitState) -> Any:
    return wait_until(lambda: q.get(admit_id).state is state and q.get(admit_id),
                      what=f"{admit_id} {state}")


def test_exclusive_entries_take_turns(queue: AdmitQueue) -> None:
    me = PidRef.current()
    first = queue.add("a", me, vram_mb=None, exclusive=True)
    second = queue.add("b", me, vram_mb=None, exclusive=True, priority=-1)
    got = _state(queue, first.admit_id, AdmitState.ADMITTED)
    assert got.gpu == 0 and got.reserved_mb == 24 * GIB
    waiting = wait_until(lambda: queue.get(second.admit_id).waiting_reason or "" if
                         "exclusive" in (queue.get(second.admit_id).waiting_reason or "")
                         else None, what="an exclusive reason")
    assert "GPU0" in waiting
    assert [e.admit_id for e in queue.all()] == [second.admit_id, first.admit_id]
    queue.release(first.admit_id)
    _state(queue, second.admit_id, AdmitState.ADMITTED)
    assert queue.get(first.admit_id).release_reason == "released by its holder"


def test_shared_entries_fit_by_memory(queue: AdmitQueue) -> None:
    me = PidRef.current()
    a = queue.add("a", me, vram_mb=10 * GIB, exclusive=False)
    b = queue.add("b", me, vram_mb=10 * GIB, exclusive=False)
    c = queue.add("c", me, vram_mb=10 * GIB, exclusive=False)
    _state(queue, a.admit_id, AdmitState.ADMITTED)
    _state(queue, b.admit_id, AdmitState.ADMITTED)
    reason = wait_until(lambda: queue.get(c.admit_id).waiting_reason or "" if
                        "needs" in (queue.get(c.admit_id).waiting_reason or "") else None,
                        what="a memory reason")
    assert reason == "needs 10.0 GiB on GPU0, 4.0 GiB free after reservations"
    assert sum(r.vram_mb for r in Ledger().entries()) == 20 * GIB
    queue.release(b.admit_id)
    _state(queue, c.admit_id, AdmitState.ADMITTED)


def test_entries_with_cores_fit_by_cores(api_env: dict, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    """Issue 34: a profile's ``cpus`` are reserved like its memory."""
    monkeypatch.setenv("EVALTUI_CPUS", "4")
    sched = JobScheduler(tick_interval=0.05, probe_interval=0.05).start()
    try:
        queue, me = sched.admits, PidRef.current()
        a = queue.add("a", me, vram_mb=GIB, exclusive=False, cpus=3)
        b = queue.add("b", me, vram_mb=GIB, exclusive=False, cpus=2)
        _state(queue, a.admit_id, AdmitState.ADMITTED)
        reason = wait_until(lambda: "core" in (queue.get(b.admit_id).waiting_reason or "")
                            and queue.get(b.admit_id).waiting_reason, what="a cores reason")
        assert reason == "needs 2 cores, 1 core free after reservations"
        assert [r.cpus for r in Ledger().entries()] == [3.0]
        queue.release(a.admit_id)
        _state(queue, b.admit_id, AdmitState.ADMITTED)
    finally:
        sched.stop()


def test_a_dead_holder_frees_its_place(queue: AdmitQueue, holder) -> None:
    me = PidRef.current()
    blocker = queue.add("blocker", me, vram_mb=None, exclusive=True)
    _state(queue, blocker.admit_id, AdmitState.ADMITTED)
    waiting_holder = holder()
    waiting = queue.add("w", waiting_holder, vram_mb=None, exclusive=True)
    running_holder = holder()
    running = queue.add("r", running_holder, vram_mb=1000, exclusive=False, priority=5)
    wait_until(lambda: queue.get(waiting.admit_id).waiting_reason != "queued: admission at "
               "the next tick", what="a first decision")
    queue.release(blocker.admit_id)
    _state(queue, running.admit_id, AdmitState.ADMITTED)
    for ref in (waiting_holder, running_holder):
        os.kill(ref.pid, signal.SIGKILL)
    for entry in (waiting, running):
        gone = _state(queue, entry.admit_id, AdmitState.RELEASED)
        assert gone.release_reason == "its holder exited"
    with Ledger().transaction() as txn:  # the reservation of the dead holder is purged
        assert txn.entries == []


def test_bind_hands_the_reservation_over(queue: AdmitQueue, holder) -> None:
    entry = queue.add("a", PidRef.current(), vram_mb=5000, exclusive=False)
    _state(queue, entry.admit_id, AdmitState.ADMITTED)
    command = holder()
    bound = queue.bind(entry.admit_id, command)
    assert (bound.holder_pid, bound.holder_create_time) == (command.pid, command.create_time)
    [reservation] = Ledger().entries()
    assert reservation.holder_pid == command.pid and reservation.vram_mb == 5000
    with pytest.raises(HolderNotRunning):
        queue.bind(entry.admit_id, PidRef(command.pid, 1.0))
    os.kill(command.pid, signal.SIGKILL)
    _state(queue, entry.admit_id, AdmitState.RELEASED)
    with pytest.raises(AdmitError):
        queue.bind(entry.admit_id, PidRef.current())


def test_the_interactive_lock_holds_admits_back(queue: AdmitQueue) -> None:
    InteractiveLock().acquire("someone", 60)
    entry = queue.add("a", PidRef.current(), vram_mb=0, exclusive=False)
    wait_until(lambda: "interactive lock held by someone" in
               (queue.get(entry.admit_id).waiting_reason or ""), what="the lock reason")
    InteractiveLock().release()
    _state(queue, entry.admit_id, AdmitState.ADMITTED)


def test_wait_is_a_long_poll(queue: AdmitQueue) -> None:
    InteractiveLock().acquire("someone", 60)
    entry = queue.add("a", PidRef.current(), vram_mb=0, exclusive=False)
    seen = wait_until(lambda: queue.get(entry.admit_id).waiting_reason.startswith("interactive")
                      and queue.get(entry.admit_id), what="lock reason")
    unchanged = queue.wait(entry.admit_id, 0.3, seen.version)
    assert unchanged.version == seen.version
    assert queue.wait(entry.admit_id, 0.3, seen.version - 1).version == seen.version  # at once
    InteractiveLock().release()
    changed = queue.wait(entry.admit_id, 10, seen.version)
    assert changed.version > seen.version


def test_eval_runs_and_admits_share_the_gpu(backend: Backend) -> None:
    """An exclusive admit keeps eval runs off its GPU until it is released."""
    client = backend.client()
    me = PidRef.current()
    entry = client.create_admit("p", me.pid, me.create_time, marginal_vram_mb=None,
                                exclusive_gpu=True)
    wait_until(lambda: client.get_admit(entry.admit_id).state is AdmitState.ADMITTED,
               what="admission")
    run_id = client.submit(bot_spec(1, vram_mb=2000)).run_id
    reason = wait_until(lambda: [q.waiting_reason for q in client.queue()
                                 if "exclusive" in q.waiting_reason], what="a reason")
    assert "admit:" + entry.admit_id in reason[0]
    client.release_admit(entry.admit_id)
    assert backend.scheduler.wait(run_id, timeout=30) is RunState.DONE
