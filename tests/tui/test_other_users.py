"""The GPU meters say how much of a GPU's reservations other Unix users' schedulers hold
(the machine-wide ledger, DESIGN §12)."""

from __future__ import annotations

import os

import pytest
from ledgerhelpers import another_users_entry
from test_run_layout import screen_lines
from tuihelpers import wait_for

from evaltui.scheduler.admission.ledger import Ledger
from evaltui.tui.widgets.meters import ResourceMeters

pytestmark = pytest.mark.anyio


async def test_gpu_meter_marks_other_users_reservations(runs, make_backend, app_factory) -> None:
    # A live holder of "another" user, in that user's own ledger file.
    with another_users_entry(Ledger().directory, "their-run", outputs="/theirs",
                             vram_mb=6144):
        app = app_factory(make_backend())
        async with app.run_test(size=(200, 40)) as pilot:
            meters = app.screen.query_one(ResourceMeters)
            await wait_for(lambda: meters.resources is not None, what="a reading")
            await pilot.pause()
            [entry] = [e for e in meters.resources.ledger if e.run_id == "their-run"]
            assert entry.other_user and entry.uid == os.getuid() + 4242
            lines = [line for line in screen_lines(app) if "other users" in line]
            assert len(lines) == 1 and "6.0 other users" in lines[0], lines
