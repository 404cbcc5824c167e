"""The shipped BabyAI model policy: features, batch invariance, serving, training script."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaltui.benchmarks.babyai import load_manifest
from evaltui.benchmarks.babyai.env import BabyAIEnv
from evaltui.benchmarks.babyai.model import (
    ANY_COLOUR,
    DEFAULT_WEIGHTS,
    NUM_FEATURES,
    BabyAIModelPolicy,
    encode,
    parse_mission,
)
from evaltui.engine.graph.definition import GraphDefinition
from evaltui.engine.hosting.channel import new_secret
from evaltui.engine.hosting.hostprocess import HostConfig, HostProcess
from evaltui.engine.hosting.proxy import RemoteError, connect
from evaltui.engine.hosting.stacking import BatchOfOne, stack

REPO = Path(__file__).resolve().parents[2]
MODEL = "evaltui.benchmarks.babyai.model:BabyAIModelPolicy"


@pytest.fixture(scope="module")
def observations() -> list[dict[str, Any]]:
    """Real observations: the first steps of 40 GoToLocal episodes under a fixed walk."""
    env = BabyAIEnv(frame_stride=0)
    out = []
    try:
        for episode in load_manifest("GoToLocal", limit=40):
            out.append(env.set_episode(episode)["obs"])
            for action in (1, 2, 2, 0):
                step = env.call("step", {"action": action})
                out.append(step["obs"])
                if step["done"]:
                    break
    finally:
        env.close()
    return out


def test_weights_ship_small() -> None:
    assert DEFAULT_WEIGHTS.is_file() and DEFAULT_WEIGHTS.stat().st_size <= 5 * 1024 * 1024


def test_missions_and_features() -> None:
    assert parse_mission("go to the red ball") == (0, 1)
    assert parse_mission("go to a grey key") == (5, 0)
    assert parse_mission("go to the box") == (ANY_COLOUR, 2)
    assert parse_mission("pick up the purple unicorn") == (ANY_COLOUR, -1)
    image = np.zeros((1, 7, 7, 3), np.uint8)
    image[0, 3, 5] = (6, 0, 0)  # a red ball
    x = encode(image, [1], ["go to the red ball"])
    assert x.shape == (1, NUM_FEATURES) and set(np.unique(x)) == {0.0, 1.0}
    assert x.sum() == 49 * 3 + 1 + 1 + 1 + 1  # cells, one match, direction, colour, type
    with pytest.raises(ValueError, match="obs.image"):
        encode(np.zeros((1, 5, 5, 3), np.uint8), [0], ["go to the red ball"])
    with pytest.raises(ValueError, match="direction"):
        encode(image, [7], ["go to the red ball"])
    bad = image.copy()
    bad[0, 0, 0, 0] = 200
    with pytest.raises(ValueError, match="outside"):
        encode(bad, [0], ["go to the red ball"])


def test_actions_do_not_depend_on_the_batch(observations: list[dict[str, Any]]) -> None:
    policy = BabyAIModelPolicy()
    alone = [BatchOfOne(policy).call("act", {"obs": o})["action"] for o in observations]
    assert {int(a) for a in alone} <= set(range(7))
    x = encode(*(stack(observations)[k] for k in ("image", "direction", "mission")))
    logits_alone = np.concatenate([policy.net.logits(x[i:i + 1]) for i in range(len(x))])
    for size in (2, 3, 8, 17, len(observations)):
        logits = np.concatenate([policy.net.logits(x[i:i + size])
                                 for i in range(0, len(x), size)])
        assert np.array_equal(logits, logits_alone)  # bit for bit, not approximately
        actions = np.concatenate([policy.act(stack(observations[i:i + size]))["action"]
                                  for i in range(0, len(observations), size)])
        assert actions.tolist() == [int(a) for a in alone]


def test_served_batched_equals_one_by_one(observations: list[dict[str, Any]]) -> None:
    secret = new_secret()
    sockets = Path(tempfile.mkdtemp(prefix="evt-"))
    host = HostProcess(HostConfig(name="policy", impl=MODEL, secret=secret,
                                  url=f"evaltui+unix://{sockets}/m.sock", max_wait_ms=20))
    host.start()
    try:
        local = BatchOfOne(BabyAIModelPolicy())
        expected = [int(local.call("act", {"obs": o})["action"]) for o in observations]
        got: dict[int, list[int]] = {}

        def caller(k: int) -> None:
            with connect(host.url, secret) as proxy:
                got[k] = [int(proxy.call("act", {"obs": o})["action"])
                          for o in observations[k::4]]

        threads = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        for k in range(4):
            assert got[k] == expected[k::4]
        with connect(host.url, secret) as proxy:
            stats = proxy.stats()
            assert stats["requests"] == len(observations) and stats["max_batch_size_seen"] > 1
            broken = dict(observations[0], image=np.zeros((3, 3), np.uint8))
            with pytest.raises(RemoteError, match="obs.image"):
                proxy.call("act", {"obs": broken})
    finally:
        host.stop()
        for path in sockets.iterdir():
            path.unlink()
        sockets.rmdir()


def test_model_graph_is_a_shared_batched_policy() -> None:
    graph = GraphDefinition.from_dict(json.loads((REPO / "evaltui/graphs/model.json").read_text()))
    classes = graph.check()
    assert graph.nodesets["policy"].parallelism == "shared"
    spec = classes["policy"].node_specs()["act"]
    assert spec.batched and spec.batch_dim == "obs"
    assert ("@obs", "policy.obs") in graph.edges


def test_training_script_is_deterministic(tmp_path: Path) -> None:
    outs = []
    for name in ("a.npz", "b.npz"):
        proc = subprocess.run([sys.executable, str(REPO / "scripts/train_babyai_policy.py"),
                               "--quick", "--out", str(tmp_path / name)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["samples"] > 0 and 0 <= report["heldout_sr"] <= 1
        outs.append((tmp_path / name).read_bytes())
    assert outs[0] == outs[1]
    policy = BabyAIModelPolicy(weights=str(tmp_path / "a.npz"))
    assert policy.net.weights[0].shape[0] == NUM_FEATURES
