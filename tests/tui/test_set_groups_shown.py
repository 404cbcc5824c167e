"""The queue's set group is shown, every time: a tree shown in the same pass as its first
nodes kept the height of its empty self (0 rows) until the set's shape changed, so the
set was listed but not drawn (CI's flaky `test_queue_with_a_set`: 3 of 24 here before
the fix). Repeated, because it was a race between the first read and the layout."""

from __future__ import annotations

import pytest
from setfixtures import build_set
from tuihelpers import wait_for

from evaltui.tui.widgets.set_groups import SetGroups

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("attempt", range(12))
async def test_the_set_group_is_drawn_once_listed(attempt, runs, outputs, make_backend,
                                                   app_factory) -> None:
    build_set(outputs, runs["done"])
    app = app_factory(make_backend())
    async with app.run_test(size=(120, 36)):
        groups = app.screen.query_one(SetGroups)
        await wait_for(lambda: bool(groups.root.children), timeout=30, what="the set listed")
        await wait_for(lambda: groups.size.height > 0, timeout=10,
                       what=f"the listed set drawn (height {groups.size.height})")
