"""Bad input is rejected before a run_id is allocated, with the field named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from runhelpers import builtin_graph

from evaltui.contract.spec import SpecError
from tests.runprep import prepare_run


def spec(**eval_fields) -> dict:
    return {"graph": builtin_graph("bot"), "eval": eval_fields}


@pytest.mark.parametrize(("data", "field", "text"), [
    (spec(dataset="imagenet"), "eval.dataset", "unknown dataset 'imagenet'"),
    (spec(split="GoToMars"), "eval.split", "unknown split 'GoToMars'"),
    (spec(episode_count=-5), "eval.episode_count", "greater than or equal to 1"),
    (spec(start_episode_index=-1), "eval.start_episode_index", "greater than or equal to 0"),
    (spec(worker_count=0), "eval.worker_count", "greater than or equal to 1"),
    (spec(episode_indices=[3, 9999]), "eval.episode_indices[1]", "9999 is out of range"),
    (spec(episode_indices=[-2]), "eval.episode_indices", "indices must be >= 0"),
    (spec(start_episode_index=490, episode_count=20), "eval.episode_count", "exceeds"),
    (spec(episode_selectors={"scene_id": "("}), "eval.episode_selectors", "invalid regex"),
    (spec(episode_selectors={"scene_id": "^nothing$"}), "eval.episode_selectors",
     "no episode matches"),
    (spec(selectors={"brain.noise": 0.1}), "eval.selectors.brain.noise", "no nodeset or node"),
    (spec(colour="red"), "eval.colour", "Extra inputs are not permitted"),
    ({"eval": {}}, "graph", "Field required"),
    ({"graph": {"name": "g", "nodesets": {}, "nodes": {}, "edges": [],
                "loop": {"env": "e", "step": "s"}}}, "graph.loop.env", "no nodeset named 'e'"),
    ({"graph": "not a graph"}, "graph", "valid dictionary"),
    ({"graph": builtin_graph("bot"), "scheduling": {"priority": 1000}},
     "scheduling.priority", "less than or equal to 100"),
    # param values are checked against the nodeset constructor's annotations
    (spec(selectors={"policy.noise": "abc"}), "graph.nodesets.policy.params.noise",
     "unable to parse string as a number (got 'abc'; BabyAIBotPolicy expects float)"),
    (spec(selectors={"env.frame_stride": 1.5}), "graph.nodesets.env.params.frame_stride",
     "fractional part"),
    ({"graph": builtin_graph("bot", env__check_mission="maybe")},
     "graph.nodesets.env.params.check_mission", "valid boolean"),
    # ... and against their declared bounds, Annotated[float, Field(ge=0, le=1)] (issue 25)
    (spec(selectors={"policy.noise": 5}), "graph.nodesets.policy.params.noise",
     "less than or equal to 1 (got 5; BabyAIBotPolicy expects float >= 0 and <= 1)"),
    (spec(selectors={"policy.noise": -0.5}), "graph.nodesets.policy.params.noise",
     "greater than or equal to 0"),
    (spec(selectors={"policy.seed": -1}), "graph.nodesets.policy.params.seed",
     "greater than or equal to 0"),
    (spec(selectors={"env.tile_size": 0}), "graph.nodesets.env.params.tile_size",
     "BabyAIEnv expects int >= 1 and <= 64"),
    (spec(selectors={"env.frame_stride": -1}), "graph.nodesets.env.params.frame_stride",
     "greater than or equal to 0"),
    (spec(selectors={"env.sim_latency_ms": -3}), "graph.nodesets.env.params.sim_latency_ms",
     "greater than or equal to 0"),
    ({"graph": builtin_graph("model", policy__forward_latency_ms=-1)},
     "graph.nodesets.policy.params.forward_latency_ms", "greater than or equal to 0"),
    ({"graph": builtin_graph("model", policy__weights="/no/such/weights.npz")},
     "graph.nodesets.policy.params.weights", "no such file '/no/such/weights.npz'"),
])
def test_bad_spec_names_the_field_and_writes_nothing(data, field, text, tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    with pytest.raises(SpecError) as err:
        prepare_run(data, outputs)
    assert err.value.field == field
    assert text in str(err.value)
    assert not outputs.exists()


def test_jsonl_dataset_with_a_garbage_line_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "mine.jsonl"
    bad.write_text('{"episode_id": "a"}\n{oops\n')
    with pytest.raises(SpecError, match=r"eval.dataset: .*mine.jsonl:2: not JSON"):
        prepare_run(spec(dataset=str(bad)), tmp_path / "outputs")
    assert not (tmp_path / "outputs").exists()


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaltui.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_cli_rejects_bad_input_with_exit_code_2(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    out = run_cli("eval", "bot", "--episodes", "-3", "--outputs", str(outputs), cwd=tmp_path)
    assert out.returncode == 2
    assert "eval.episode_count" in out.stderr
    out = run_cli("eval", "no_such_graph", "--outputs", str(outputs), cwd=tmp_path)
    assert out.returncode == 2 and "built-in graph" in out.stderr
    (tmp_path / "g.json").write_text("{not json")
    out = run_cli("eval", "g.json", "--outputs", str(outputs), cwd=tmp_path)
    assert out.returncode == 2 and "not a JSON file" in out.stderr
    assert not outputs.exists()


def test_cli_eval_runs_a_jobspec_file_and_prints_results(tmp_path: Path) -> None:
    job = {"graph": builtin_graph("bot"), "eval": {"split": "GoToLocal", "episode_count": 3}}
    (tmp_path / "job.json").write_text(json.dumps(job))
    out = run_cli("eval", "job.json", "--json", "--outputs", str(tmp_path / "o"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["state"] == "done"
    assert result["summary"]["episodes_finished"] == 3
    assert result["summary"]["metrics"]["success"] == 1.0


def test_cli_help_lists_the_commands(tmp_path: Path) -> None:
    out = run_cli("--help", cwd=tmp_path)
    assert out.returncode == 0 and "eval" in out.stdout


def test_a_badly_typed_set_value_is_exit_2_with_the_field_and_no_run_dir(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    proc = subprocess.run([sys.executable, "-m", "evaltui.cli", "eval", "bot", "--set",
                           "policy.noise=abc", "--outputs", str(outputs)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "graph.nodesets.policy.params.noise" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not outputs.exists()


def range_spec(**params: float) -> dict:
    graph = builtin_graph("bot")
    graph["nodesets"]["policy"] = {"impl": "param_nodesets:RangePolicy",
                                   "parallelism": "inline", "params": params}
    graph["edges"] = [["@obs", "policy.obs"], ["policy.action", "env_step.action"]]
    return {"graph": graph, "active_workspace_dir": str(Path(__file__).parent)}


@pytest.mark.parametrize(("params", "field", "text"), [
    ({"low": 3.0, "high": 2.0}, "graph.nodesets.policy.params.low",
     "must be <= high (2.0), got 3.0"),
    ({"high": 500.0}, "graph.nodesets.policy.params", "the range is too wide"),
    ({"low": -500.0, "high": -200.0}, "graph.nodesets.policy.params",
     f"RangePolicy.check_params failed: {Path(__file__).parent / 'param_nodesets.py'}:25: "
     "KeyError: 'no such key'"),
])
def test_a_nodeset_s_check_params_refuses_before_anything_is_written(
        params: dict, field: str, text: str, tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    with pytest.raises(SpecError) as err:
        prepare_run(range_spec(**params), outputs)
    assert (err.value.field, err.value.message) == (field, text)
    assert not outputs.exists()


def test_params_that_pass_check_params_are_accepted(tmp_path: Path) -> None:
    run_dir, _ = prepare_run(range_spec(low=0.5), tmp_path / "outputs")
    assert run_dir.is_dir()
