"""``evaltui race`` on success decides by STEP (its decision replayed from the rows by
evaltui's rule and by the authors' package agree), and ``race --set SET MEMBER`` races a
set's member against the set's baseline on one recorded order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaltui.cli import main
from evaltui.engine.episode.metrics import row_values
from evaltui.engine.stats.step import StepDecider
from evaltui.engine.stats.steppolicy import load_policy
from evaltui.results.verifystop import dealt_order
from evaltui.rundir.jsonfiles import read_json


@pytest.fixture(scope="module")
def step_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One state dir for this module's races: STEP's n_max=40 policy is synthesized once."""
    return tmp_path_factory.mktemp("step_state")


@pytest.fixture
def shared_state(step_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EVALTUI_STATE_DIR", str(step_cache))
    return step_cache


def _race(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaltui.cli", "race", *args,
                           "--outputs", str(tmp_path / "o")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


def _pairs(runs: dict[str, str], n: int) -> list[tuple[float, float]]:
    """The first ``n`` (A, B) success pairs in the recorded order, read from the rows
    (a row cancelled at the stop has no success: none is among the first n)."""
    values = {}
    for side, run_dir in runs.items():
        rows = (read_json(p) for p in Path(run_dir).glob("episodes/ep*/episode.json"))
        values[side] = {r["episode_index"]: row_values(r).get("success") for r in rows}
    order = dealt_order(read_json(Path(runs["A"]) / "spec.json"))
    assert order == dealt_order(read_json(Path(runs["B"]) / "spec.json"))
    return [(values["A"][i], values["B"][i]) for i in order[:n]]


def test_a_success_race_is_decided_by_step_as_the_package_decides(
        tmp_path: Path, shared_state: Path) -> None:
    proc = _race(tmp_path, "bot", "noisy_bot", "--episodes", "40", "--workers", "2",
                 "--order-seed", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    assert (shared_state / "step_policies" / "n_max_40_alpha_0.025.npz").is_file()
    result = json.loads(proc.stdout)
    assert result["decided_by"] == "step" and result["step"]["n_max"] == 40
    assert result["winner"] == "A" and result["decided_at"] < 40
    pairs = _pairs(result["runs"], result["decided_at"])
    table = load_policy(40, 0.025, synthesize=False)  # the race's, from the state dir
    ours = StepDecider(table, seed=result["step"]["seed"])
    for a, b in pairs:
        ours.add(a, b)
    assert (ours.winner, ours.decided_at) == ("A", result["decided_at"])
    sbt = pytest.importorskip("sequentialized_barnard_tests")
    ref = sbt.MirroredStepTest(sbt.Hypothesis.P0LessThanP1, 200, 0.05)
    ref.policy, ref.n_max, ref.random_seed = table, 40, result["step"]["seed"]
    ref.reset()
    decisions = [ref.step(int(a), int(b)).decision for a, b in pairs]
    assert decisions[-1] == sbt.Decision.AcceptNull  # the mirror: A's rate is the higher
    assert all(d == sbt.Decision.FailToDecide for d in decisions[:-1])
    # A fixed-n comparison is quoted beside it (the two-proportion design, per side).
    assert isinstance(result["fixed_n_80_power"], int)


def _set_file(tmp_path: Path, **extra: object) -> Path:
    path = tmp_path / "noise.json"
    path.write_text(json.dumps({"name": "noise", "base": {"graph": "noisy_bot",
                                                          "dataset": "babyai"},
                                "matrix": {"policy.noise": [0.0, 0.3, 0.7]},
                                "baseline": {"policy.noise": 0.0}, **extra}))
    return path


def _split_set_file(tmp_path: Path) -> Path:
    """Two splits: a baseline on the other split evaluates other episodes."""
    return _set_file(tmp_path, matrix={"policy.noise": [0.0, 0.3, 0.7],
                                       "split": ["GoToLocal", "GoToObjMaze"]},
                     baseline={"policy.noise": 0.0, "split": "GoToLocal"})


def test_a_set_member_races_its_baseline_on_one_order(tmp_path: Path,
                                                      shared_state: Path) -> None:
    proc = _race(tmp_path, "--set", str(_set_file(tmp_path)), "policy.noise=0.7",
                 "--episodes", "40", "--workers", "2", "--order-seed", "5", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["sides"] == {"A": "noise baseline {policy.noise: 0.0}",
                               "B": "noise {policy.noise: 0.7}"}
    specs = {side: read_json(Path(d) / "spec.json") for side, d in result["runs"].items()}
    assert specs["A"]["eval"]["selectors"]["policy.noise"] == 0.0
    assert specs["B"]["eval"]["selectors"]["policy.noise"] == 0.7
    assert {s["eval"]["order_seed"] for s in specs.values()} == {5}
    assert all(s["scheduling"].get("set_id") is None for s in specs.values())  # no set run
    assert result["winner"] == "A" and result["decided_at"] < 40
    assert len(_pairs(result["runs"], result["n"])) == result["n"]


@pytest.mark.parametrize(("args", "message"), [
    (["policy.noise=0.0"], "MEMBER: {policy.noise: 0.0} is the baseline itself"),
    (["policy.noise=0.5"], "MEMBER: {policy.noise: 0.5} is no member of the set"),
    (["policy.noise=0.3", "bot"], "with --set give one member"),
    (["policy.noise=0.3", "--split", "GoToLocal"], "leave out --dataset and --split"),
    (["policy.noise=0.3", "--baseline", "policy.noise"], "'policy.noise' must look like AXIS"),
    (["policy.noise=0.3,split=GoToLocal", "--baseline", "policy.noise=0.0,split=GoToObjMaze"],
     "evaluate different episodes (split: 'GoToLocal' vs 'GoToObjMaze')"),
    (["policy.noise=0.3,split=GoToLocal", "--baseline", "policy.noise=0.0"],
     "--baseline: {policy.noise: 0.0} matches 2 members; name more axes"),
])
def test_a_bad_set_race_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = _split_set_file(tmp_path) if "split" in " ".join(args) else _set_file(tmp_path)
    code = main(["race", "--set", str(path), *args,
                 "--outputs", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o" / "eval_runs").exists()  # nothing was started


def test_a_set_without_a_baseline_needs_one(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = _set_file(tmp_path, baseline=None)
    assert main(["race", "--set", str(path), "policy.noise=0.3"]) == 2
    assert "baseline: the set file names no baseline" in capsys.readouterr().err


def test_step_on_a_metric_that_is_not_binary_is_refused(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    assert main(["race", "bot", "noisy_bot", "--metric", "spl", "--decide-by", "step"]) == 2
    assert "--decide-by step needs a binary metric" in capsys.readouterr().err


def test_a_split_too_short_for_step_falls_back_to_the_cs_and_says_so(tmp_path: Path) -> None:
    proc = _race(tmp_path, "bot", "noisy_bot", "--episodes", "6", "--order-seed", "3",
                 "--json")
    assert proc.returncode == 0, proc.stderr
    assert ("note: STEP needs at least 10 pairs (n_max=6); success is decided by the "
            "betting CS") in proc.stderr
    assert json.loads(proc.stdout)["decided_by"] == "cs"


def test_step_asked_for_a_split_too_short_is_refused_before_any_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["race", "bot", "noisy_bot", "--episodes", "6", "--decide-by", "step",
                 "--outputs", str(tmp_path / "o")])
    assert code == 2 and "error: STEP needs at least 10 pairs" in capsys.readouterr().err
    assert not (tmp_path / "o" / "eval_runs").exists()
