"""A scheduler's submit checks a spec without building (``check_spec(build=False)``): the
nodesets whose environment the cache lacks are left for after the build, everything else
is checked as ever, and nothing is built or written to the cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ownenv_helpers import HERE, NUMPY1, cartpole_graph, write_dataset

from evaltui.contract.spec import SpecError, parse_spec
from evaltui.engine.graph.specchecks import check_spec


def spec_of(graph: dict, tmp_path: Path, **eval_fields: object) -> object:
    dataset = write_dataset(tmp_path / "eps.jsonl", 3)
    return parse_spec({"graph": graph, "active_workspace_dir": str(HERE),
                       "eval": {"dataset": str(dataset), **eval_fields}})


def test_unbuilt_nodesets_are_left_for_later_and_nothing_is_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("EVALTUI_ENV_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(HERE))
    checked = check_spec(spec_of(cartpole_graph({"requirements": NUMPY1}), tmp_path),
                         build=False)
    assert set(checked.unbuilt) == {"env"}
    assert "env" not in checked.classes and "policy" in checked.classes  # the rest: checked
    assert checked.spec.eval.step_budget is None  # the env's own limit: asked once built
    assert checked.episode_indices == [0, 1, 2]
    assert not cache.exists() or not any(cache.iterdir())


@pytest.mark.parametrize(("break_it", "field"), [
    (lambda g: g["nodesets"]["policy"].update(impl="own_env_nodesets:NoSuchPolicy"),
     "graph.nodesets.policy.impl"),
    (lambda g: g["nodesets"]["policy"].update(impl="own_env_nodesets:BatchedBalancePolicy",
                                              parallelism="shared",
                                              params={"numpy_major": "abc"}),
     "graph.nodesets.policy.params.numpy_major"),
    (lambda g: g["edges"].append(["env_step.obs", "policy.obs"]), "graph.edges"),
    (lambda g: g["nodes"]["policy"].update(nodeset="polcy"), "graph.nodes.policy.nodeset"),
    (lambda g: g["loop"].update(step="env_stpe"), "graph.loop.step"),
])
def test_what_needs_no_build_is_still_refused_at_submit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, break_it: object, field: str) -> None:
    monkeypatch.setenv("EVALTUI_ENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(HERE))
    graph = json.loads(json.dumps(cartpole_graph({"requirements": NUMPY1})))
    break_it(graph)  # type: ignore[operator]
    with pytest.raises(SpecError) as info:
        check_spec(spec_of(graph, tmp_path), build=False)
    assert info.value.field.startswith(field), str(info.value)
