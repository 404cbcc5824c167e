"""A racing set's screen: an eliminated member's state reads ``out at n=N`` and the notes
say what the race is (the set screen draws the same table as ``set show``)."""

from __future__ import annotations

import pytest
from setfixtures import build_set
from test_set_screen import cells, set_screen
from textual.widgets import DataTable, Static
from tuihelpers import SIZE

from evaltui.contract.setspec import RaceStanding
from evaltui.sets.setdir import read_set, write_set

pytestmark = pytest.mark.anyio


async def test_the_set_screen_marks_eliminated_members_and_when(
        runs, outputs, make_backend, app_factory) -> None:
    path = build_set(outputs, runs["done"])
    record = read_set(path)
    record.members[0].eliminated_at = 10  # step 100 went out after 10 episodes
    record.race = RaceStanding(metric="success", alpha=0.05, member_alpha=0.0125, n=20,
                               full_n=20, survivors=[m.key for m in record.members[1:3]],
                               decided=True)
    write_set(path, record)
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        screen = await set_screen(app, path)
        await pilot.pause()
        table = screen.query_one("#set-table", DataTable)
        state = [str(c.label) for c in table.columns.values()].index("state")
        states = [row[state] for row in cells(screen)]
        assert states[:3] == ["out at n=10", "done", "done"]
        notes = str(screen.query_one("#set-notes", Static).render())
        assert "race on success (decided at n=20 of 20, 2 left): 'out at n=N'" in notes
