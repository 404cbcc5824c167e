"""Meta-World's parts without a run: the shipped manifests and task lists match metaworld,
the noisy expert is the expert plus seeded noise, the example model answers a batch as it
answers each request, and the example graphs pass spec check."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("metaworld", reason="metaworld is not installed "
                    "(pip install 'evaltui[metaworld]')")

from evaltui.benchmarks.metaworld import MT10_TASKS, MT50_TASKS, SPLITS, manifest_path  # noqa: E402
from evaltui.benchmarks.metaworld.expert import MetaWorldExpert  # noqa: E402
from evaltui.benchmarks.metaworld.manifest import manifest_text  # noqa: E402
from evaltui.benchmarks.metaworld.model import MetaWorldLinearPolicy  # noqa: E402
from evaltui.benchmarks.metaworld.mw_import import make_env, make_expert  # noqa: E402
from evaltui.benchmarks.metaworld.rendering import FrameSchedule  # noqa: E402
from evaltui.engine.graph.specbuild import build_spec  # noqa: E402
from evaltui.engine.graph.specchecks import validate_spec  # noqa: E402


def test_task_lists_and_shipped_manifests_match_metaworld() -> None:
    from metaworld.env_dict import MT10_V3, MT50_V3

    assert MT10_TASKS == tuple(MT10_V3) and MT50_TASKS == tuple(MT50_V3)
    for split in SPLITS:
        assert manifest_path(split).read_text() == manifest_text(split), split


def _actions(policy: MetaWorldExpert, task: str, seed: int, steps: int) -> np.ndarray:
    env = make_env(task, seed)
    obs, _ = env.reset()
    policy.begin_episode({"task": task, "seed": seed})
    out = []
    for _ in range(steps):
        action = policy.act(obs)["action"]
        out.append(action)
        obs, *_ = env.step(action)
    env.close()
    return np.array(out)


def test_the_noisy_expert_is_the_expert_plus_seeded_clipped_noise() -> None:
    plain = _actions(MetaWorldExpert(noise=0.0), "push-v3", 3, 5)
    env = make_env("push-v3", 3)
    obs, _ = env.reset()
    assert np.array_equal(plain[0], make_expert("push-v3").get_action(obs))
    noisy = _actions(MetaWorldExpert(noise=0.5, seed=7), "push-v3", 3, 5)
    again = _actions(MetaWorldExpert(noise=0.5, seed=7), "push-v3", 3, 5)
    other = _actions(MetaWorldExpert(noise=0.5, seed=8), "push-v3", 3, 5)
    assert np.array_equal(noisy, again)
    assert not np.array_equal(noisy, other)
    assert np.all(np.abs(noisy) <= 1.0) and not np.allclose(noisy, plain)


def test_the_example_model_is_batch_invariant() -> None:
    policy = MetaWorldLinearPolicy(seed=1)
    rng = np.random.default_rng(0)
    batch = rng.normal(size=(5, 39))
    together = policy.act(batch)["action"]
    alone = np.concatenate([policy.act(batch[i:i + 1])["action"] for i in range(5)])
    assert together.shape == (5, 4) and np.array_equal(together, alone)


@pytest.mark.parametrize("graph", ["mw_expert", "mw_noisy", "mw_model"])
def test_the_example_graphs_pass_spec_check(graph: str) -> None:
    checked = validate_spec(build_spec(graph, dataset="metaworld", split="MT50", episodes=3))
    assert checked.spec.eval.step_budget == 500 and checked.warnings == []


def test_the_frame_schedule() -> None:
    every = FrameSchedule.parse("every:10")
    assert every.at_reset and [s for s in range(1, 31) if every.emit(s, False)] == [10, 20, 30]
    end = FrameSchedule.parse("end")
    assert not end.at_reset and end.emit(37, True) and not end.emit(36, False)
    assert not FrameSchedule.parse("off").on
    for bad in ("every:0", "every", "sometimes"):
        with pytest.raises(ValueError, match="frames must be"):
            FrameSchedule.parse(bad)


def test_a_metaworld_graph_on_a_dataset_without_tasks_is_refused_at_spec_check() -> None:
    from evaltui.contract.spec import SpecError

    with pytest.raises(SpecError, match="eval.dataset: .* has no task and seed"):
        validate_spec(build_spec("mw_expert", dataset="babyai", episodes=2))


@pytest.mark.parametrize("rule", ["spl>=0.5", "ndtw:width<=0.2"])
def test_a_stop_rule_on_a_path_metric_meta_world_lacks_is_refused(rule: str) -> None:
    """Meta-World rows have no paths: a rule on spl/ndtw/sdtw would never be met and the
    run would deal its whole split without a word (it did: 12 of 12 episodes, no stop)."""
    from evaltui.contract.spec import SpecError

    spec = build_spec("mw_expert", dataset="metaworld", split="reach-v3", episodes=4)
    spec["eval"]["stop_when"] = rule
    with pytest.raises(SpecError, match=r"eval.stop_when: .*metaworld rows have no paths"):
        validate_spec(spec)
    spec["eval"]["stop_when"] = "success>=0.5"
    assert validate_spec(spec).spec.eval.stop_when == "success>=0.5"
