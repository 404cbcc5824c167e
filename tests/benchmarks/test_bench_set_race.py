"""A racing set (``race:``): episodes used vs the full split to reach the same decision.

Run: ``pytest -m bench -s tests/benchmarks/test_bench_set_race.py``. Numbers are printed
side by side from one run (docs/performance.md); nothing here asserts a time.

Six members stand in for a checkpoint set: the built-in ``noisy_bot`` at six noise levels
(a checkpoint axis needs a policy that loads weights; the bot has none, and its noise
orders the members as training orders checkpoints). The set runs once in full (every
member the whole split) and once racing (rounds of 10, alpha 0.05 over the members);
the race's survivors are compared with the full split's best member(s).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from evaltui.cli import main
from evaltui.contract.setspec import SET_FILENAME, SETS_DIRNAME
from evaltui.results.runrows import load_run
from evaltui.rundir.jsonfiles import read_json

pytestmark = pytest.mark.bench

SPLIT = 100
NOISE = [0.0, 0.15, 0.3, 0.45, 0.6, 0.8]


def _set(tmp_path: Path, outputs: Path, name: str, race: dict | None) -> dict:
    data = {"name": name, "base": {"graph": "noisy_bot", "dataset": "babyai",
                                   "split": "GoToLocal", "episodes": SPLIT, "workers": 2},
            "matrix": {"policy.noise": NOISE}}
    if race is not None:
        data["race"] = race
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["set", "run", str(path)]) == 0
    return read_json(outputs / SETS_DIRNAME / name / SET_FILENAME)


def _means(record: dict) -> dict[float, tuple[float, int]]:
    out = {}
    for m in record["members"]:
        rows = load_run(Path(m["run_dir"])).rows
        wins = sum(1 for r in rows if r["status"] == "ok" and r["metrics"].get("success"))
        out[m["axes"]["policy.noise"]] = (wins / len(rows), len(rows))
    return out


def test_a_racing_checkpoint_set_uses_fewer_episodes_for_the_same_decision(
        tmp_path: Path, isolated_dirs: dict[str, Path]) -> None:
    outputs = isolated_dirs["outputs"]
    full = _means(_set(tmp_path, outputs, "full", None))
    record = _set(tmp_path, outputs, "raced", {"round": 10})
    raced = _means(record)
    top = max(mean for mean, _ in full.values())
    best = {noise for noise, (mean, _) in full.items() if mean == top}
    survivors = {m["axes"]["policy.noise"] for m in record["members"]
                 if m.get("eliminated_at") is None}
    used = sum(n for _, n in raced.values())
    print(f"\n{'noise':>6} {'full SR':>8} {'raced SR':>9} {'raced n':>8} {'out at':>7}")
    for m in record["members"]:
        noise = m["axes"]["policy.noise"]
        print(f"{noise:6.2f} {full[noise][0]:8.3f} {raced[noise][0]:9.3f} "
              f"{raced[noise][1]:8d} {m.get('eliminated_at') or '-':>7}")
    print(f"race: {used} episodes of {SPLIT * len(NOISE)} ({1 - used / (SPLIT * len(NOISE)):.0%}"
          f" saved), decided at n={record['race']['n']}; survivors {sorted(survivors)}, "
          f"the full split's best {sorted(best)}: same decision "
          f"{survivors <= best or best <= survivors}")
    assert best & survivors  # the full split's best was never eliminated
