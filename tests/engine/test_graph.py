"""GraphDefinition: round trip and every structural error named before anything runs."""

from __future__ import annotations

import copy

import pytest
from fixture_nodesets import corridor_graph

from evaltui.engine.graph.definition import GraphDefinition, GraphError


def check(graph: dict) -> None:
    GraphDefinition.from_dict(graph).check()


def test_round_trip_and_firing_order() -> None:
    data = corridor_graph(fail_on_goal=3)
    graph = GraphDefinition.from_dict(data)
    assert graph.to_dict() == {**data, "nodesets": {
        "env": {**data["nodesets"]["env"], "params": {}},
        "policy": data["nodesets"]["policy"]}}
    graph.check()
    assert graph.topological_order() == ["policy", "env_step"]


def broken(mutate) -> dict:
    graph = copy.deepcopy(corridor_graph())
    mutate(graph)
    return graph


@pytest.mark.parametrize(("mutate", "path", "text"), [
    (lambda g: g["nodesets"]["policy"].update(impl="nope.module:X"),
     "nodesets.policy.impl", "cannot import module 'nope.module'"),
    (lambda g: g["nodesets"]["policy"].update(impl="fixture_nodesets:Missing"),
     "nodesets.policy.impl", "no attribute 'Missing'"),
    (lambda g: g["nodesets"]["policy"].update(impl="no_colon"),
     "nodesets.policy.impl", "package.module:Class"),
    (lambda g: g["nodesets"]["policy"].update(impl="fixture_nodesets:corridor_graph"),
     "nodesets.policy.impl", "not a NodeSet subclass"),
    (lambda g: g["nodesets"]["policy"].update(params={"bogus": 1}),
     "nodesets.policy.params.bogus", "takes no parameter 'bogus'"),
    (lambda g: g["nodes"]["policy"].update(op="fly"), "nodes.policy.op", "no node op 'fly'"),
    (lambda g: g["edges"].append(["ghost.out", "policy.obs"]), "edges[2][0]", "dangling edge"),
    (lambda g: g["edges"].__setitem__(1, ["policy.action", "env_step.speed"]),
     "edges[1][1]", "has no input 'speed'"),
    (lambda g: g["edges"].pop(1), "nodes.env_step", "input port 'action' has no edge"),
    (lambda g: g["edges"].__setitem__(0, ["@reward", "policy.obs"]), "edges[0][0]",
     "loop port '@reward' is not an output"),
    (lambda g: g["edges"].__setitem__(0, ["env_step.obs", "policy.obs"]), "edges", "cycle"),
    (lambda g: g["nodesets"]["env"].update(parallelism="shared"),
     "nodesets.env.parallelism", "must be 'replicated'"),
    (lambda g: g["nodesets"]["env"].update(parallelism="sideways"),
     "nodesets.env.parallelism", "must be one of"),
    (lambda g: g["loop"].update(step="policy"), "loop.step", "not an op of the env nodeset"),
    (lambda g: g["loop"].update(env="policy"), "loop.env", "is not an EnvNodeSet"),
    (lambda g: g.pop("edges"), "edges", "field required"),
    (lambda g: g.update(extra=1), "extra", "unknown field"),
    (lambda g: g["edges"].append(["a.b"]), "edges[2]", "pair"),
])
def test_structural_errors_name_the_field(mutate, path: str, text: str) -> None:
    with pytest.raises(GraphError) as err:
        check(broken(mutate))
    assert err.value.path == path
    assert text in str(err.value)


def test_selectors_override_params_by_nodeset_or_node_name() -> None:
    graph = GraphDefinition.from_dict(corridor_graph())
    assert graph.with_selectors({"policy.sleep_sec": 0.5}).nodesets["policy"].params == \
        {"sleep_sec": 0.5}
    with pytest.raises(GraphError, match="no nodeset or node named 'brain'"):
        graph.with_selectors({"brain.noise": 1})
