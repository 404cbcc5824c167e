"""The queue header says why nothing is admitted while the reservation ledger cannot be
stored (DESIGN §12, fail closed), and stops saying it once a store works again.

The ledger's directory is a small tmpfs filled to the last byte (root only; skipped
elsewhere)."""

from __future__ import annotations

import pytest
from ledgerhelpers import reserve
from tuihelpers import SIZE, wait_for

from evaltui.scheduler.admission.ledger import Ledger
from evaltui.tui.widgets.queue_lines import SchedulerHeader

pytestmark = pytest.mark.anyio


async def test_header_says_the_ledger_cannot_be_stored(
    app_factory, make_backend, small_disk, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = small_disk("ledger", "256k")
    monkeypatch.setenv("EVALTUI_LEDGER_DIR", str(disk.path))  # the scheduler's ledger there
    backend = make_backend()
    ledger = backend.scheduler._core.ledger
    assert ledger.directory == disk.path
    disk.fill()
    reserve(ledger, "a")
    app = app_factory(backend)
    async with app.run_test(size=SIZE) as pilot:
        header = app.screen.query_one(SchedulerHeader)
        await wait_for(
            lambda: "cannot store the reservation ledger" in str(header.content),
            what="the ledger warning",
        )
        text = str(header.content)
        assert "No space left on device" in text and str(disk.path) in text, text
        await pilot.pause()
        assert header.region.height == 1
        disk.free()
        reserve(ledger, "b")  # stores "a" too: the warning goes
        await wait_for(
            lambda: "cannot store the reservation ledger" not in str(header.content),
            what="the warning to go",
        )
    assert {r.run_id for r in Ledger(disk.path).entries()} == {"a", "b"}


async def test_header_and_resources_say_the_ledger_is_per_user(
    app_factory, make_backend, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALTUI_LEDGER_DIR", str(tmp_path / "not-set-up"))
    backend = make_backend()
    note = backend.scheduler.resources().ledger_note
    assert note is not None and "of other users on this machine cannot see" in note
    app = app_factory(backend)
    async with app.run_test(size=(200, 50)):
        header = app.screen.query_one(SchedulerHeader)
        await wait_for(lambda: "per-user ledger" in str(header.content),
                       what="the per-user note")
        assert "other users cannot see these reservations" in str(header.content)


async def test_the_api_address_stays_on_screen_beside_the_per_user_note_at_120_columns(
    app_factory, make_backend, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API's address is what a second terminal needs to attach; the per-user note
    (its full reason in ``evaltui ledger where``) comes after it and is what an ellipsis
    cuts at 120 columns."""
    monkeypatch.setenv("EVALTUI_LEDGER_DIR", str(tmp_path / "not-set-up"))
    backend = make_backend()
    backend.api_note = "demo: fake GPU · API: http://127.0.0.1:48123 (docs /docs)"
    app = app_factory(backend)
    async with app.run_test(size=(120, 36)) as pilot:
        header = app.screen.query_one(SchedulerHeader)
        await wait_for(lambda: "per-user ledger" in str(header.content),
                       what="the per-user note")
        await pilot.pause()
        shown = "".join(s.text for s in header.render_line(0))
        assert "API: http://127.0.0.1:48123" in shown, shown
