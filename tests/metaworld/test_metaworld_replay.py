"""``evaltui verify --replay`` of Meta-World runs: each episode re-run from its task, seed
and logged actions in a fresh env reproduces every logged reward and done flag, its
positions, its step count and its row's metrics; a changed action diverges at its step.
The expert answers float32 actions, the noisy expert float64: both are replayed in the
dtype they were answered in (Meta-World scales a float32 action in float32)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mwruns import eval_run, evaltui

from evaltui.results.mwreplay import action_dtype
from evaltui.results.replaycheck import logged_steps, replay_run
from evaltui.results.verify import load_episode_dirs

REACH_ONE = ("--dataset", "metaworld", "--split", "reach-v3", "--episodes", "1")


@pytest.fixture(scope="module")
def reach_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One reach-v3 episode (~50-70 steps) of each expert: seconds."""
    def run(graph: str) -> Path:
        state = {"EVALTUI_STATE_DIR": str(tmp_path_factory.mktemp(f"{graph}-state"))}
        return eval_run(tmp_path_factory.mktemp(graph), graph, *REACH_ONE, env=state)
    return {"expert": run("mw_expert"), "noisy": run("mw_noisy")}


@pytest.mark.parametrize(("graph", "dtype"), [("expert", "float32"), ("noisy", "float64")])
def test_replay_reproduces_every_step_and_the_row(reach_runs, graph: str, dtype: str) -> None:
    run = reach_runs[graph]
    steps = list(logged_steps(run / "episodes" / "ep0000" / "log.jsonl", "env_step"))
    assert action_dtype(steps).__name__ == dtype
    if graph == "expert":  # the command, once; the noisy one in this process (seconds)
        done = evaltui("verify", "--replay", "--json", str(run))
        assert done.returncode == 0, done.stdout + done.stderr
        replay = json.loads(done.stdout)["replay"]
    else:
        replay = replay_run(run, load_episode_dirs(run)).to_json()
    assert replay["ok"] and replay["unsupported"] is None, replay
    record = json.loads((run / "episodes" / "ep0000" / "episode.json").read_text())
    assert (replay["episodes_replayed"], replay["steps_replayed"]) == \
        (1, record["step_count"])


def test_a_changed_action_diverges_at_its_step(reach_runs) -> None:
    log = reach_runs["noisy"] / "episodes" / "ep0000" / "log.jsonl"
    original = log.read_text()
    lines = original.splitlines()
    at = [i for i, line in enumerate(lines) if '"node":"env_step"' in line][4]  # step 5
    rec = json.loads(lines[at])
    rec["inputs"]["action"][0] = -rec["inputs"]["action"][0]
    lines[at] = json.dumps(rec)
    log.write_text("\n".join(lines) + "\n")
    try:
        report = replay_run(reach_runs["noisy"], load_episode_dirs(reach_runs["noisy"]))
    finally:
        log.write_text(original)
    [divergence] = report.divergences
    assert divergence.step == 5 and divergence.what.startswith("reward: replay"), divergence
