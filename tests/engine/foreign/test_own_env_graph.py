"""The ``environment`` field: checked with one line, refused on inline nodesets, and the
faults that need no environment to be built (evaltui's own interpreter stands in)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ownenv_helpers import cartpole_graph, evaltui_eval, rows, run_dir_of

from evaltui.engine.graph.definition import GraphDefinition, GraphError


@pytest.mark.parametrize(("environment", "path", "says"), [
    ({"pyhton": "/usr/bin/python3"}, "environment.pyhton", "unknown field"),
    ({"requirements": ["numpy<2"], "command": ["conda"]}, "environment.command", "give one of"),
    ({"requirements": "numpy<2"}, "environment.requirements", "list of requirement strings"),
    ({"requirements_file": "/nonexistent/reqs.txt"}, "environment.requirements_file",
     "no such file"),
    ({"command": []}, "environment.command", "non-empty list"),
    ([], "environment", "must be an object"),
])
def test_a_malformed_environment_is_one_line_naming_its_key(environment: object, path: str,
                                                            says: str) -> None:
    graph = cartpole_graph(environment)  # type: ignore[arg-type]
    with pytest.raises(GraphError, match=says) as info:
        GraphDefinition.from_dict(graph)
    assert info.value.path == f"nodesets.env.{path}" and "\n" not in str(info.value)


def test_an_inline_nodeset_with_an_environment_is_refused_saying_why() -> None:
    graph = cartpole_graph(policy="inline", policy_environment={"python": sys.executable})
    with pytest.raises(GraphError, match="'inline' nodeset runs inside each worker") as info:
        GraphDefinition.from_dict(graph)
    assert info.value.path == "nodesets.policy.environment"


def test_the_field_round_trips_and_relative_paths_become_absolute(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reqs.txt").write_text("numpy<2\n")
    graph = GraphDefinition.from_dict(cartpole_graph({"requirements_file": "reqs.txt",
                                                      "python": "3.11"}))
    env = graph.to_dict()["nodesets"]["env"]["environment"]
    assert env == {"requirements_file": str(tmp_path / "reqs.txt"), "python": "3.11"}
    assert "environment" not in graph.to_dict()["nodesets"]["policy"]  # unchanged without


def test_a_missing_interpreter_fails_the_submit_with_exit_2(tmp_path: Path) -> None:
    out = evaltui_eval(tmp_path, cartpole_graph({"python": "/opt/nowhere/bin/python3.8"}))
    assert out.returncode == 2, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if "nowhere" in ln]
    assert lines and "graph.nodesets.env.environment" in lines[0]
    assert "/opt/nowhere/bin/python3.8 of nodeset 'env' does not exist" in lines[0]


def test_a_module_failing_to_import_in_its_environment_names_its_file_and_line(
        tmp_path: Path) -> None:
    (tmp_path / "broken_sim.py").write_text(
        "import os\n\nraise ImportError('No module named mujoco_py (simulated)')\n")
    graph = cartpole_graph({"python": sys.executable})
    graph["nodesets"]["env"]["impl"] = "broken_sim:SimEnv"
    out = evaltui_eval(tmp_path, graph)
    assert out.returncode == 2, out.stderr
    line = next(ln for ln in out.stderr.splitlines() if "broken_sim" in ln)
    assert f"{tmp_path / 'broken_sim.py'}:3: ImportError: No module named mujoco_py" in line
    assert "graph.nodesets.env.impl" in line


def test_a_command_prefix_wraps_the_interpreter(tmp_path: Path) -> None:
    prefixed = cartpole_graph({"command": ["env", "EVALTUI_TEST_LAUNCHER=1"],
                               "python": sys.executable},
                              require_env="EVALTUI_TEST_LAUNCHER")
    out = evaltui_eval(tmp_path / "prefixed", prefixed, "--workers", "2", episodes=3)
    assert out.returncode == 0, out.stderr
    plain = evaltui_eval(tmp_path / "plain", cartpole_graph(), "--workers", "2", episodes=3)
    assert plain.returncode == 0, plain.stderr
    got = rows(run_dir_of(tmp_path / "prefixed"))
    assert got == rows(run_dir_of(tmp_path / "plain"))
    assert [r["status"] for r in got] == ["ok"] * 3


def test_verbose_prints_the_traceback_from_the_other_environment(tmp_path: Path) -> None:
    (tmp_path / "broken_sim.py").write_text(
        "import os\n\ndef load():\n    raise ImportError('no mujoco_py')\n\nload()\n")
    graph = cartpole_graph({"python": sys.executable})
    graph["nodesets"]["env"]["impl"] = "broken_sim:SimEnv"
    out = evaltui_eval(tmp_path, graph, "--verbose")
    assert out.returncode == 2, out.stderr
    assert "Traceback (most recent call last)" in out.stderr
    assert f'File "{tmp_path / "broken_sim.py"}", line 4, in load' in out.stderr
    assert f"{tmp_path / 'broken_sim.py'}:4: ImportError: no mujoco_py" in out.stderr


def test_a_launcher_not_on_path_is_one_line_naming_it() -> None:
    graph = GraphDefinition.from_dict(cartpole_graph({"command": ["no-such-launcher-x", "run"]}))
    with pytest.raises(GraphError, match="the launcher 'no-such-launcher-x' of nodeset 'env' "
                                         "is not on PATH") as info:
        graph.check()
    assert info.value.path == "nodesets.env.environment"


def test_an_interpreter_named_on_path_is_found_and_describes_the_class() -> None:
    name = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    graph = GraphDefinition.from_dict(cartpole_graph({"python": name}, numpy_major=2))
    classes = graph.check()
    env = classes["env"]
    assert env.__name__ == "NumpyCartPole" and env.__module__ == "own_env_nodesets"
    assert set(env.node_specs()) == {"step"} and env.node_specs()["step"].outputs == (
        "obs", "done", "reward")
    assert graph.resolved_params(classes)["env"]["max_steps"] == 30  # its defaults, from there
