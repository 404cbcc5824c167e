"""A run with a stop rule: real BabyAI episodes dealt in the recorded order, stopped by the
betting confidence sequence, its rows a prefix of that order, the same at any K."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runhelpers import builtin_graph, comparable, episode_rows, run_to_end

from evaltui.engine.episode.metrics import row_values
from evaltui.engine.graph.datasets import load_episodes, resolve_dataset
from evaltui.engine.stats.betting import betting_interval
from evaltui.engine.stats.order import dealing_order
from evaltui.export.payload import summary_values
from evaltui.results.verify import verify_run
from evaltui.rundir.jsonfiles import read_json, write_json_atomic
from evaltui.runview.snapshot import read_snapshot

SPLIT = 120


def _spec(workers: int, **ev: object) -> dict:
    return {"graph": builtin_graph("noisy_bot"),
            "eval": {"dataset": "babyai", "split": "GoToLocal", "episode_count": SPLIT,
                     "worker_count": workers, "order_seed": 7, **ev}}


def _order(seed: int) -> list[int]:
    path, _ = resolve_dataset("babyai", "GoToLocal")
    return dealing_order(list(range(SPLIT)), load_episodes(path), seed)


def test_a_stopped_run_is_a_prefix_of_its_order_and_the_same_at_any_k(tmp_path: Path) -> None:
    runs = {k: run_to_end(_spec(k, stop_when="success:width<=0.45"), tmp_path / f"k{k}")
            for k in (1, 3)}
    order = _order(7)
    rows_by_k = {}
    for k, run_dir in runs.items():
        summary = read_json(run_dir / "summary.json")
        assert summary["status"] == "done"
        stopped = summary["stopped"]
        rows = {r["episode_index"]: r for r in episode_rows(run_dir)}
        n = len(rows)
        assert sorted(rows) == sorted(order[:n]), "the rows are a prefix of the order"
        assert stopped["n"] == n and stopped["met_at"] <= n < SPLIT
        assert stopped["full_n"] == SPLIT and stopped["metric"] == "success"
        assert "confidence sequence" in stopped["method"]
        lo, hi = stopped["interval"]
        assert hi - lo <= 0.45
        # The interval is the CS over the rows in dealing order (what verify recomputes).
        xs = [row_values(rows[i])["success"] for i in order[:n]]
        assert (lo, hi) == tuple(round(v, 6) for v in betting_interval(xs, population=SPLIT))
        rows_by_k[k] = rows
    # The report's notes and the exports' numbers name the interval a confidence sequence.
    snap = read_snapshot(runs[1])
    stop = read_json(runs[1] / "summary.json")["stopped"]
    assert any("confidence sequence" in note and f"n={stop['n']}" in note
               for note in snap.notes())
    values = summary_values(snap)
    assert (values["success/cs95_low"], values["success/cs95_high"]) == tuple(stop["interval"])
    assert values["stopped/full_n"] == SPLIT
    # evaltui verify recomputes the order and the CS from the rows; a changed bound differs.
    assert verify_run(runs[1]).ok, verify_run(runs[1]).mismatches
    summary = read_json(runs[1] / "summary.json")
    summary["stopped"]["interval"][0] -= 0.01
    write_json_atomic(runs[1] / "summary.json", summary)
    assert [m.field for m in verify_run(runs[1]).mismatches] == ["interval"]
    common = set(rows_by_k[1]) & set(rows_by_k[3])
    assert len(common) >= 10
    for i in common:
        same = {k: v for k, v in comparable(rows_by_k[1][i]).items() if k != "worker_count"}
        assert same == {k: v for k, v in comparable(rows_by_k[3][i]).items()
                        if k != "worker_count"}


def test_max_episodes_deals_the_first_of_the_order(tmp_path: Path) -> None:
    run_dir = run_to_end(_spec(2, max_episodes=9), tmp_path / "o")
    summary = read_json(run_dir / "summary.json")
    assert summary["stopped"] is None and summary["episodes_total"] == 9
    assert sorted(r["episode_index"] for r in episode_rows(run_dir)) == sorted(_order(7)[:9])


def test_a_bad_rule_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for rule, says in (("success>>0.8", "not a stop rule clause"),
                       ("path_length<0.5", "not a metric bounded in [0, 1]")):
        proc = subprocess.run(
            [sys.executable, "-m", "evaltui.cli", "eval", "bot", "--episodes", "3",
             "--stop-when", rule, "--outputs", str(tmp_path / "o")],
            cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "eval.stop_when" in lines[0] and says in lines[0], lines
    assert not list((tmp_path / "o").glob("eval_runs/*"))
