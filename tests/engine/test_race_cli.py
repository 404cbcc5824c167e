"""``evaltui race A B``: the built-in bot against the noisy bot on the same BabyAI episodes,
decided before the split ends, both runs dealt the same recorded order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from evaltui.contract.states import RunState
from evaltui.engine.episode.metrics import row_values
from evaltui.engine.stats.betting import betting_interval
from evaltui.results.verifystop import dealt_order
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.status import derive_run_state


def _race(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaltui.cli", "race", *args,
                           "--outputs", str(tmp_path / "o")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_race_decides_for_the_better_graph_on_a_prefix_of_one_order(tmp_path: Path) -> None:
    proc = _race(tmp_path, "bot", "noisy_bot", "--episodes", "80", "--workers", "2",
                 "--order-seed", "3", "--decide-by", "cs", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["decided_by"] == "cs" and result["step"] is None
    assert result["winner"] == "A" and result["n"] < 80 and result["interval"][1] < 0
    runs = {side: Path(path) for side, path in result["runs"].items()}
    order = dealt_order(read_json(runs["A"] / "spec.json"))
    assert order == dealt_order(read_json(runs["B"] / "spec.json"))
    values = {}
    for side, run_dir in runs.items():
        assert derive_run_state(run_dir) in (RunState.CANCELLED, RunState.DONE)
        rows = {r["episode_index"]: r for r in
                (read_json(p) for p in run_dir.glob("episodes/ep*/episode.json"))}
        assert set(rows) <= set(order[: len(rows) + 2 * 2])  # + what K=2 had dealt ahead
        values[side] = {i: row_values(r).get("success") for i, r in rows.items()}
    diffs = [(values["B"][i] - values["A"][i] + 1) / 2 for i in order[: result["n"]]]
    lo, hi = betting_interval(diffs)
    assert result["interval"] == [2 * lo - 1, 2 * hi - 1]


def test_a_metric_that_is_not_bounded_is_refused(tmp_path: Path) -> None:
    proc = _race(tmp_path, "bot", "noisy_bot", "--metric", "path_length")
    assert proc.returncode == 2 and "not a metric bounded" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
