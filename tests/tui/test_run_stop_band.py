"""The run screen of a running run with a stop rule draws its confidence-sequence band,
narrowing as episodes of the dealing order finish: the run's own computation (checked
against ``verify``'s recomputation from the rows), at 80x24 as a line and at 120x36 as a
plot beside the running means. Snapshots: ``--snapshot-update`` and look at them."""

from __future__ import annotations

from pathlib import Path

import pytest
from runfixtures import iso, new_run, write_episode, write_record, write_summary
from test_run_layout import screen_lines
from textual.pilot import Pilot
from tuihelpers import wait_for

from evaltui.contract.pidref import PidRef
from evaltui.engine.episode.metrics import row_values
from evaltui.engine.stats.betting import betting_interval
from evaltui.results.verifystop import dealt_order
from evaltui.rundir.jsonfiles import read_json, write_json_atomic
from evaltui.tui.widgets.stop_band import StopBandView

RULE = "success:width<=0.3"
SPLIT = 40


def _stopping_run(outputs: Path, live: PidRef, first: int) -> tuple[Path, list[int]]:
    """A running run of 40 episodes with a stop rule, its first ``first`` episodes of the
    order finished; the order."""
    run_dir = new_run(outputs, "20260115_091000", episodes=SPLIT)
    spec = read_json(run_dir / "spec.json")
    spec["eval"].update(stop_when=RULE, order_seed=3)
    write_json_atomic(run_dir / "spec.json", spec)
    order = dealt_order(spec)
    _finish(run_dir, order[:first])
    write_record(run_dir, state="running", admitted_at=iso(5), pid=live.pid,
                 pid_create_time=live.create_time)
    return run_dir, order


def _finish(run_dir: Path, indices: list[int]) -> None:
    for index in indices:
        write_episode(run_dir, index)
    rows = [read_json(p) for p in sorted(run_dir.glob("episodes/ep*/episode.json"))]
    write_summary(run_dir, rows, status="running", total=SPLIT, elapsed=20.0, started=29)


def _interval(run_dir: Path, order: list[int], n: int) -> tuple[float, float]:
    """verify's recomputation: the rows' values in the order, a betting CS over the split."""
    xs = [row_values(read_json(run_dir / f"episodes/ep{i:04d}/episode.json"))["success"]
          for i in order[:n]]
    return betting_interval(xs, 0.05, population=SPLIT)


pytestmark = pytest.mark.anyio


async def test_the_band_narrows_as_episodes_finish_and_is_the_runs_cs(
        outputs: Path, live_pids: list[PidRef], app_factory) -> None:
    run_dir, order = _stopping_run(outputs, live_pids[0], 10)
    app = app_factory(run_dir=run_dir)
    async with app.run_test(size=(120, 36)) as pilot:
        view = app.screen.query_one(StopBandView)
        await wait_for(lambda: view.band is not None and view.band.watch.n == 10,
                       what="the band over 10 episodes")
        first = view.band.state().interval
        assert first == pytest.approx(_interval(run_dir, order, 10), abs=1e-6)
        await pilot.pause()
        shown = "\n".join(screen_lines(app))
        assert f"stop rule {RULE}" in shown and "n=10/40" in shown
        assert "→ ≤.30" in shown  # the width against the rule's target

        _finish(run_dir, order[10:25])  # 15 more land while the screen watches
        await wait_for(lambda: view.band.watch.n == 25, what="the band over 25 episodes")
        now = view.band.state().interval
        assert now == pytest.approx(_interval(run_dir, order, 25), abs=1e-6)
        assert now[1] - now[0] < first[1] - first[0]
        assert [h[0] for h in view.band.history] == list(range(1, 26))


async def test_at_80x24_the_band_is_a_line(outputs: Path, live_pids: list[PidRef],
                                          app_factory) -> None:
    run_dir, order = _stopping_run(outputs, live_pids[0], 12)
    app = app_factory(run_dir=run_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.screen.query_one(StopBandView)
        await wait_for(lambda: view.band is not None and view.band.watch.n == 12,
                       what="the band over 12 episodes")
        await pilot.pause()
        lines = screen_lines(app)
        line = next(x for x in lines if f"rule {RULE}" in x)
        lo, hi = _interval(run_dir, order, 12)
        cs = f"[{lo:.2f},{hi:.2f}]".replace("0.", ".")
        assert f"rule {RULE} · SR 95% CS {cs} n=12/40 · width" in line
        assert "→ ≤.30" in line  # the width against the rule's target, on one line

        # The run's own word once it stopped: summary.json ``stopped``.
        summary = read_json(run_dir / "summary.json")
        write_json_atomic(run_dir / "summary.json", {**summary, "stopped": {
            "rule": RULE, "n": 12, "metric": "success", "interval": [lo, hi], "full_n": 40,
            "met_at": 11, "decision": None, "method": "betting"}})
        await wait_for(lambda: any("stopped at n=12 of 40 (met at 11) · SR 95% CS" in x
                                   for x in screen_lines(app)), what="the stop shown")


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_run_screen_with_a_stop_rule_at(snap_compare, outputs: Path,
                                        live_pids: list[PidRef], app_factory, size) -> None:
    run_dir, _ = _stopping_run(outputs, live_pids[0], 18)

    def band_n(app) -> int:
        views = app.screen.query(StopBandView)
        return views.first().band.watch.n if views and views.first().band else -1

    async def loaded(pilot: Pilot[None]) -> None:
        await wait_for(lambda: band_n(pilot.app) == 18, what="the band over 18 episodes")
        await pilot.pause()

    assert snap_compare(app_factory(run_dir=run_dir), terminal_size=size, run_before=loaded)
