"""The ClassVar batching opt-in (``batched``/``batch_dim`` on the class) equals the decorator."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from pool_helpers import walk_graph, walk_spec
from runhelpers import comparable, episode_rows, run_to_end

from evaltui.contract.spec import SpecError
from evaltui.engine.nodes import NodeSet, NodeSpec, node
from evaltui.rundir.jsonfiles import read_json
from tests.runprep import prepare_run


def test_classvar_form_batches_the_nodes_with_that_input() -> None:
    from classvar_nodesets import ClassVarBatchPolicy, DecoratedBatchPolicy

    specs = ClassVarBatchPolicy.node_specs()
    assert specs["act"] == DecoratedBatchPolicy.node_specs()["act"] == NodeSpec(
        "act", ("obs",), ("action",), batched=True, batch_dim="obs")
    assert not specs["echo"].batched and specs["echo"].batch_dim is None  # no obs input
    assert ClassVarBatchPolicy.batching_error() is None


def test_own_decorator_wins_and_a_subclass_can_switch_it_off() -> None:
    class Both(NodeSet):
        batched: ClassVar[bool] = True
        batch_dim: ClassVar[str] = "obs"

        @node(inputs=("obs", "x"), outputs=("a",), batched=True, batch_dim="x")
        def act(self, obs: Any, x: Any) -> dict[str, Any]:
            return {"a": x}

    class Off(Both):
        batched: ClassVar[bool] = False

        @node(inputs=("obs",), outputs=("b",))
        def other(self, obs: Any) -> dict[str, Any]:
            return {"b": obs}

    assert Both.node_specs()["act"].batch_dim == "x"
    assert not Off.node_specs()["other"].batched and Off.batching_error() is None


@pytest.mark.parametrize(("body", "text"), [
    ({"batched": True, "batch_dim": "observation"},
     "declares batch_dim = 'observation', but none of its nodes has an input 'observation'"),
    ({"batched": True}, "declares batched = True but no batch_dim"),
    ({"batched": "yes", "batch_dim": "obs"}, "batched must be a bool"),
])
def test_wrong_declarations_name_the_class(body: dict[str, Any], text: str) -> None:
    @node(inputs=("obs",), outputs=("action",))
    def act(self: Any, obs: Any) -> dict[str, Any]:
        return {"action": 1}

    cls = type("MyPolicy", (NodeSet,), {**body, "act": act})
    error = cls.batching_error()
    assert error is not None and error.startswith("MyPolicy") and text in error


def test_wrong_batch_dim_fails_at_submit_naming_the_class(tmp_path: Path) -> None:
    graph = walk_graph(shared_policy=True)
    graph["nodesets"]["policy"]["impl"] = "classvar_nodesets:WrongBatchDimPolicy"
    outputs = tmp_path / "outputs"
    with pytest.raises(SpecError) as err:
        prepare_run(walk_spec(tmp_path, [2, 2], graph, worker_count=2), outputs)
    assert err.value.field == "graph.nodesets.policy.impl"
    assert "WrongBatchDimPolicy declares batch_dim = 'observation'" in str(err.value)
    assert "inputs: ['obs', 'x']" in str(err.value)
    assert not outputs.exists()


def batch_sizes(trace: Path) -> list[int]:
    return [int(line) for path in trace.glob("batches.*") for line in path.read_text().split()]


def test_classvar_form_gets_batches_in_a_real_run_with_identical_rows(tmp_path: Path) -> None:
    runs = {}
    for form in ("DecoratedBatchPolicy", "ClassVarBatchPolicy"):
        trace = tmp_path / f"trace-{form}"
        trace.mkdir()
        graph = walk_graph(shared_policy=True,
                           policy={"trace_dir": str(trace), "call_sleep_ms": 20.0})
        graph["nodesets"]["policy"]["impl"] = f"classvar_nodesets:{form}"
        spec = walk_spec(tmp_path, [5] * 16, graph, worker_count=4)
        run_dir = run_to_end(spec, tmp_path / form)
        sizes = batch_sizes(trace)
        # Each episode walks 5 steps: every request was answered, some in one batch.
        assert sum(sizes) == 16 * 5 and max(sizes) > 1, (form, sizes)
        assert read_json(run_dir / "summary.json")["status"] == "done"
        runs[form] = episode_rows(run_dir)
    rows = {form: [comparable(r) for r in got] for form, got in runs.items()}
    assert all(r["status"] == "ok" and r["metrics"]["success"] == 1.0
               for r in runs["ClassVarBatchPolicy"])
    assert rows["ClassVarBatchPolicy"] == rows["DecoratedBatchPolicy"]
