"""Fail closed: a reservation that cannot be stored admits nothing (DESIGN §12).

The ledger's directory is a small tmpfs filled to the last byte (root only; skipped
elsewhere): every write of the ledger fails with ENOSPC, as on a full disk. (The rest of
the state dir stays writable so that the runs can charge the fake GPU what they use.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from ledgerhelpers import reserve
from schedhelpers import line_spec, wait_until

from evaltui.contract.states import RunState
from evaltui.rundir.jsonfiles import read_json
from evaltui.scheduler.admission.ledger import Ledger
from evaltui.scheduler.scheduler import JobScheduler

CAPACITY_MB = 24576
RUN_MB = 16000  # two never fit at once


class LiveRuns:
    """Counts, every 10 ms, the run processes of ``outputs`` that are alive at once."""

    def __init__(self, outputs: Path) -> None:
        self.outputs = outputs
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> LiveRuns:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(0.01):
            live = 0
            for rec in (self.outputs / "eval_runs").glob("*/scheduler.json"):
                try:
                    data = read_json(rec)
                except (OSError, ValueError):
                    continue
                if data.get("state") in ("starting", "running") and _lives(data.get("pid")):
                    live += 1
            self.peak = max(self.peak, live)


def _lives(pid: object) -> bool:
    """A process that runs (an exited one the scheduler has not reaped yet holds nothing)."""
    if not isinstance(pid, int):
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_full_state_dir_admits_nothing_and_says_why(
    make_scheduler: Callable[..., JobScheduler],
    fake_gpus: Callable[[str], None],
    small_disk,
    dataset: Path,
    sched_env: dict[str, Path],
) -> None:
    disk = small_disk("ledger", "512k")
    fake_gpus(f"1x{CAPACITY_MB}")
    sched = make_scheduler(ledger=Ledger(disk.path)).start()
    spec = line_spec(dataset, episodes=4, marginal_vram_mb=RUN_MB, sleep_sec=0.05, vram_mb=RUN_MB)
    with LiveRuns(sched_env["outputs"]) as live:
        disk.fill()
        run_ids = [sched.submit(spec)[0] for _ in range(4)]
        # Nothing can be reserved, so nothing starts; each job says why.
        wait_until(
            lambda: (
                {q.waiting_kind for q in sched.queue()} == {"ledger"} and len(sched.queue()) == 4
            ),
            what="every job waiting for the ledger",
        )
        reason = sched.resources().ledger_error
        assert reason is not None and "No space left on device" in reason, reason
        assert all(str(disk.path) in q.waiting_reason for q in sched.queue())
        assert live.peak == 0
        assert disk.leftovers() == []  # no partial temp file of the ledger left behind

        # Space again: one runs; the disk fills while it runs, so even its release cannot
        # be stored, and the next must still not start until the ledger can be written.
        disk.free()
        wait_until(
            lambda: any(
                sched.get_run(r).state in (RunState.STARTING, RunState.RUNNING) for r in run_ids
            ),
            what="the first run to start",
        )
        disk.fill()
        first = next(r for r in run_ids if sched.get_run(r).state is not RunState.QUEUED)
        assert sched.wait(first, timeout=60) is RunState.DONE
        wait_until(
            lambda: (
                len(sched.queue()) == 3 and {q.waiting_kind for q in sched.queue()} == {"ledger"}
            ),
            what="the others waiting for the ledger",
        )
        assert all(sched.get_run(r).state is RunState.QUEUED for r in run_ids if r != first)

        disk.free()
        for run_id in run_ids:
            assert sched.wait(run_id, timeout=90) is RunState.DONE
        assert sched.resources().ledger_error is None
    assert live.peak == 1  # never two 16,000 MiB runs on the 24,576 MiB GPU
    assert disk.leftovers() == []


def test_a_read_only_ledger_dir_fails_closed_and_recovers(small_disk) -> None:
    """EROFS as well as ENOSPC: even the lock file cannot be opened for writing."""
    disk = small_disk("ledger", "256k")
    ledger = Ledger(disk.path)

    reserve(ledger, "a")
    disk.read_only(True)
    try:
        reserve(ledger, "b")  # kept in memory, said in ledger.error
        assert ledger.error is not None and "Read-only file system" in ledger.error
        assert {r.run_id for r in ledger.entries()} == {"a", "b"}
        assert {r.run_id for r in Ledger(disk.path).entries()} == {"a"}  # what others see
    finally:
        disk.read_only(False)
    with ledger.transaction():
        pass  # the next transaction stores what was kept
    assert ledger.error is None
    assert {r.run_id for r in Ledger(disk.path).entries()} == {"a", "b"}


def test_an_entry_that_cannot_be_stored_is_discarded_not_kept(small_disk) -> None:
    """flush_new (an admission's or a hold's store): fail closed and forget the entry, so
    the next store that works does not admit it after all."""
    from ledgerhelpers import held_entry

    from evaltui.scheduler.admission.ledger import LedgerNotDurable

    disk = small_disk("ledger", "256k")
    ledger = Ledger(disk.path)
    reserve(ledger, "a")
    disk.read_only(True)
    try:
        with ledger.transaction() as txn:
            entry = held_entry("b")
            txn.add(entry)
            with pytest.raises(LedgerNotDurable, match="Read-only file system"):
                ledger.flush_new(txn, entry.key)
            assert txn.get(entry.key) is None and not txn.changes
    finally:
        disk.read_only(False)
    reserve(ledger, "c")  # the next store that works
    assert ledger.error is None
    assert {r.run_id for r in Ledger(disk.path).entries()} == {"a", "c"}
    assert {r.run_id for r in ledger.entries()} == {"a", "c"}
