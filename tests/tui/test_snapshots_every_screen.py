"""Every screen at 80x24 (fixture run dirs, fake GPUs, fixed clock): the quit key and the
screen's core keys in its own footer, nothing cut. The keys are also asserted without
pictures in test_keys_everywhere.py; these hold the whole layout.

Regenerate with ``pytest tests/tui/test_snapshots_every_screen.py --snapshot-update`` and
look at the SVGs.
"""

from __future__ import annotations

import pytest
from everyscreen import SCREENS, build_app, open_screen
from textual.pilot import Pilot


@pytest.mark.parametrize("name", SCREENS)
def test_every_screen_at_80x24(name, snap_compare, runs, make_backend, app_factory) -> None:
    async def opened(pilot: Pilot[None]) -> None:
        await open_screen(name, pilot, runs)
        pilot.app.clear_notifications()

    assert snap_compare(build_app(name, runs, make_backend, app_factory),
                        terminal_size=(80, 24), run_before=opened)
