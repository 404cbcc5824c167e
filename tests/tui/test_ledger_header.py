"""The queue header says why nothing is admitted while the reservation ledger cannot be
stored (DESIGN §12, fail closed), and stops saying it once a store works again.

The ledger's directory is a small tmpfs filled to the last byte (root only; skipped
elsewhere)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import StaticGpuProbe, StaticHostProbe
from tuihelpers import SIZE, wait_for

from evaltui.rundir import PidRef
from evaltui.scheduler import JobScheduler
from evaltui.scheduler.ledger import Ledger, Reservation
from evaltui.tui.embedded import EmbeddedBackend
from evaltui.tui.widgets.queue_lines import SchedulerHeader

pytestmark = pytest.mark.anyio


def reserve(ledger: Ledger, run_id: str) -> None:
    me = PidRef.of(os.getpid())
    with ledger.transaction() as txn:
        txn.add(Reservation(run_id, me.pid, me.create_time, me.pid, "/o", 0, 1000, 0, False,
                            time.time()))


async def test_header_says_the_ledger_cannot_be_stored(outputs: Path, app_factory,
                                                       small_disk) -> None:
    disk = small_disk("ledger", "256k")
    ledger = Ledger(disk.path)
    scheduler = JobScheduler(outputs, gpu_probe=StaticGpuProbe(), host_probe=StaticHostProbe(),
                             ledger=ledger)
    try:
        disk.fill()
        reserve(ledger, "a")
        app = app_factory(EmbeddedBackend(scheduler, api_note="API: 127.0.0.1:8000",
                                          owner="tester"))
        async with app.run_test(size=SIZE) as pilot:
            header = app.screen.query_one(SchedulerHeader)
            await wait_for(lambda: "cannot store the reservation ledger" in str(header.content),
                           what="the ledger warning")
            text = str(header.content)
            assert "No space left on device" in text and str(disk.path) in text, text
            await pilot.pause()
            assert header.region.height == 1
            disk.free()
            reserve(ledger, "b")  # stores "a" too: the warning goes
            await wait_for(lambda: "cannot store the reservation ledger" not in str(header.content),
                           what="the warning to go")
        assert {r.run_id for r in Ledger(disk.path).entries()} == {"a", "b"}
    finally:
        scheduler.stop()
