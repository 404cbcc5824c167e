"""Replicas in the graph (DESIGN §12): the fields, their one-line errors, --replicas."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaltui.contract.spec import SpecError
from evaltui.engine.graph.definition import GraphDefinition, GraphError
from evaltui.engine.graph.replicas import ReplicaAsk, replica_ask
from evaltui.engine.graph.specbuild import build_spec
from evaltui.graphs import builtin_graph_path


def model_graph() -> dict:
    path = builtin_graph_path("model")
    assert path is not None
    return json.loads(path.read_text())


def with_policy(**fields: object) -> dict:
    graph = copy.deepcopy(model_graph())
    graph["nodesets"]["policy"].update(fields)
    return graph


def test_replicas_round_trip_and_the_runs_ask() -> None:
    graph = GraphDefinition.from_dict(with_policy(replicas=3, min_replicas=2))
    assert graph.nodesets["policy"].replicas == 3
    assert graph.nodesets["policy"].min_replicas == 2
    again = GraphDefinition.from_dict(graph.to_dict())
    assert again.to_dict() == graph.to_dict()
    assert replica_ask(graph.to_dict()) == ReplicaAsk(3, 2)
    assert replica_ask(with_policy(replicas="per_gpu")) == ReplicaAsk(None, 1)
    # Without the field the graph (and its JSON form) is as before.
    plain = GraphDefinition.from_dict(model_graph())
    assert "replicas" not in plain.to_dict()["nodesets"]["policy"]
    assert replica_ask(model_graph()) is None


@pytest.mark.parametrize(("fields", "path", "text"), [
    ({"replicas": 0}, "nodesets.policy.replicas", "must be an integer >= 1 or \"per_gpu\""),
    ({"replicas": True}, "nodesets.policy.replicas", "must be an integer >= 1"),
    ({"replicas": "all"}, "nodesets.policy.replicas", "got 'all'"),
    ({"replicas": 2, "min_replicas": 3}, "nodesets.policy.min_replicas",
     "3 is more than replicas (2)"),
    ({"replicas": "per_gpu", "min_replicas": 0}, "nodesets.policy.min_replicas",
     "must be an integer >= 1"),
    ({"min_replicas": 2}, "nodesets.policy.min_replicas", "needs replicas"),
])
def test_bad_replica_fields_are_one_line_errors(fields: dict, path: str, text: str) -> None:
    with pytest.raises(GraphError) as info:
        GraphDefinition.from_dict(with_policy(**fields))
    assert info.value.path == path
    assert text in str(info.value)
    assert "\n" not in str(info.value)


def test_replicas_only_on_a_shared_nodeset() -> None:
    graph = copy.deepcopy(model_graph())
    graph["nodesets"]["env"]["replicas"] = 2
    with pytest.raises(GraphError, match=r"nodesets\.env\.replicas: only a 'shared' nodeset "
                       r"has replicas \(this one is 'replicated'\)"):
        GraphDefinition.from_dict(graph)


def test_build_spec_sets_replicas_on_every_shared_nodeset() -> None:
    spec = build_spec("model", replicas="per_gpu")
    assert spec["graph"]["nodesets"]["policy"]["replicas"] == "per_gpu"
    assert "replicas" not in spec["graph"]["nodesets"]["env"]
    assert build_spec("model", replicas="2")["graph"]["nodesets"]["policy"]["replicas"] == 2
    with pytest.raises(SpecError, match="needs a 'shared' nodeset; graph 'babyai-bot' has none"):
        build_spec("bot", replicas=2)
    with pytest.raises(SpecError, match="--replicas must be an integer >= 1"):
        build_spec("model", replicas="0")


def test_eval_and_submit_refuse_bad_replicas_with_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "EVALTUI_OUTPUTS": str(tmp_path / "outputs"),
           "BACKEND_URL": "http://127.0.0.1:9"}  # nothing listens: never asked
    for command, args, text in (
            ("eval", ["model", "--replicas", "0"], "--replicas must be an integer >= 1"),
            ("eval", ["bot", "--replicas", "2"], "needs a 'shared' nodeset"),
            ("submit", ["model", "--replicas", "all"], "got 'all'")):  # before any backend
        proc = subprocess.run([sys.executable, "-m", "evaltui.cli", command, *args,
                               "--dataset", "babyai", "--split", "GoToLocal", "--episodes", "1"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert text in proc.stderr
    assert not (tmp_path / "outputs" / "runs").exists() or \
        not any((tmp_path / "outputs" / "runs").iterdir())  # nothing written on refusal
