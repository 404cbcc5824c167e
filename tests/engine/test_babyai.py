"""The BabyAI benchmark nodesets, driven directly by a tiny loop (no engine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaltui.benchmarks.babyai import SPLITS, load_manifest, manifest_path
from evaltui.benchmarks.babyai.bot import BabyAIBotPolicy
from evaltui.benchmarks.babyai.env import BabyAIEnv
from evaltui.engine.nodes import Frame, Trajectory, import_impl

GRAPHS = Path(__file__).resolve().parents[2] / "evaltui" / "graphs"


def run_episode(env: BabyAIEnv, policy: BabyAIBotPolicy, episode: dict[str, Any],
                max_steps: int = 2000) -> tuple[Trajectory, list[Any]]:
    """What the LoopRunner does: reset, then policy -> env step until done."""
    ports = env.set_episode(episode)
    policy.begin_episode(episode)
    frames = [ports["frame"]]
    for _ in range(max_steps):
        action = policy.call("act", {"sim": ports["sim"]})["action"]
        out = env.call("step", {"action": action})
        ports.update({k: out[k] for k in ("obs", "sim", "frame")})
        frames.append(out["frame"])
        if out["done"]:
            break
    return env.trajectory(), frames


@pytest.fixture(scope="module")
def local() -> list[dict[str, Any]]:
    return load_manifest("GoToLocal", limit=20)


@pytest.fixture()
def env() -> Any:
    sim = BabyAIEnv(frame_stride=0)
    yield sim
    sim.close()


def test_done_actions_are_enabled() -> None:
    from minigrid.envs.babyai.core import verifier

    assert os.environ["BABYAI_DONE_ACTIONS"] == "1"
    assert verifier.use_done_actions


def test_minigrid_imported_first_without_done_actions_is_refused() -> None:
    # A bare `import minigrid` is harmless (env ids register lazily); importing the
    # BabyAI envs loads the verifier, which freezes its done-actions flag.
    child_env = {k: v for k, v in os.environ.items() if k != "BABYAI_DONE_ACTIONS"}
    code = "import minigrid.envs.babyai\nimport evaltui.benchmarks.babyai.minigrid_import\n"
    proc = subprocess.run([sys.executable, "-c", code], env=child_env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "RuntimeError" in proc.stderr and "BABYAI_DONE_ACTIONS" in proc.stderr


def test_expert_follows_the_reference_path(env: BabyAIEnv, local: list[dict]) -> None:
    policy = BabyAIBotPolicy(noise=0.0)
    for episode in local:
        traj, _ = run_episode(env, policy, episode)
        assert traj.success, episode["episode_id"]
        assert len(traj.positions) - 1 == episode["geodesic_distance"]
        assert [list(p) for p in traj.positions] == episode["reference_path"]
        assert traj.nav_error == 0.0
        assert traj.extra["steps"] >= len(traj.positions)


def test_noisy_bot_fails_or_detours(env: BabyAIEnv, local: list[dict]) -> None:
    policy = BabyAIBotPolicy(noise=0.3)
    failed = detoured = 0
    for episode in local:
        traj, _ = run_episode(env, policy, episode)
        failed += not traj.success
        detoured += traj.success and len(traj.positions) - 1 > episode["geodesic_distance"]
    # Random `done`s stop some episodes early; random moves lengthen others.
    assert failed >= 1 and detoured >= 1


def test_same_seed_gives_identical_positions(local: list[dict]) -> None:
    runs = []
    for _ in range(2):
        env = BabyAIEnv(frame_stride=0)
        policy = BabyAIBotPolicy(noise=0.3, seed=7)
        runs.append([run_episode(env, policy, ep)[0].positions for ep in local[:8]])
        env.close()
    assert runs[0] == runs[1]
    # Episode results do not depend on which episodes the replica ran before.
    env = BabyAIEnv(frame_stride=0)
    alone = run_episode(env, BabyAIBotPolicy(noise=0.3, seed=7), local[5])[0].positions
    env.close()
    assert alone == runs[0][5]


def test_mission_mismatch_names_the_episode(env: BabyAIEnv, local: list[dict]) -> None:
    tampered = dict(local[0], instruction="go to the purple unicorn")
    with pytest.raises(ValueError, match="GoToLocal-0000") as info:
        env.set_episode(tampered)
    assert "purple unicorn" in str(info.value) and local[0]["instruction"] in str(info.value)
    assert "minigrid" in str(info.value)
    moved = dict(local[0], start=[99, 99])
    with pytest.raises(ValueError, match="GoToLocal-0000"):
        env.set_episode(moved)
    BabyAIEnv(frame_stride=0, check_mission=False).set_episode(tampered)


def test_frames_every_stride(local: list[dict]) -> None:
    env = BabyAIEnv(frame_stride=2, tile_size=8)
    episode = next(ep for ep in local if ep["geodesic_distance"] >= 3)
    _, frames = run_episode(env, BabyAIBotPolicy(), episode)
    height, width = env._env.unwrapped.height, env._env.unwrapped.width
    env.close()
    assert len(frames) >= 4
    for step, frame in enumerate(frames):  # step 0 is the reset
        if step % 2:
            assert frame is None
            continue
        assert isinstance(frame, Frame)
        assert frame.pixels.dtype == np.uint8
        assert frame.pixels.shape == (height * 8, width * 8, 3)


def test_sampling_rejected_prints_are_contained(capfd: pytest.CaptureFixture[str]) -> None:
    episode = load_manifest("GoToLocal", limit=9)[8]  # seed 8 rejects one sample first
    env = BabyAIEnv(frame_stride=0)
    env.set_episode(episode)
    env.close()
    out, err = capfd.readouterr()
    assert "Sampling rejected" not in out + err
    assert "Sampling rejected" in env.last_reset_output


def test_observation_and_action_validation(env: BabyAIEnv, local: list[dict]) -> None:
    ports = env.set_episode(local[0])
    assert ports["obs"]["image"].shape == (7, 7, 3) and ports["obs"]["image"].dtype == np.uint8
    assert ports["obs"]["mission"] == local[0]["instruction"]
    assert ports["frame"] is None
    for bad in (-1, 7, 2.5, "left", None):
        with pytest.raises(ValueError, match="action"):
            env.call("step", {"action": bad})
    out = env.call("step", {"action": np.int64(0)})  # numpy ints (model outputs) are fine
    assert set(out) == {"obs", "sim", "frame", "done", "reward"} and out["done"] is False


@pytest.mark.parametrize("noise", [-0.1, 1.5])
def test_bad_noise_is_rejected(noise: float) -> None:
    with pytest.raises(ValueError, match="noise"):
        BabyAIBotPolicy(noise=noise)


@pytest.mark.parametrize("split", sorted(SPLITS))
def test_manifest(split: str) -> None:
    lines = manifest_path(split).read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 500
    episodes = [json.loads(line) for line in lines]
    assert len({ep["episode_id"] for ep in episodes}) == len(episodes)
    for ep in episodes:
        assert ep["env_id"] == SPLITS[split]
        path = ep["reference_path"]
        assert path[0] == ep["start"]
        assert any(abs(path[-1][0] - gx) + abs(path[-1][1] - gy) == 1 for gx, gy in ep["goals"])
        assert len(path) - 1 == ep["geodesic_distance"]  # references are shortest paths
        steps = zip(path, path[1:], strict=False)
        assert all(abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1 for a, b in steps)


@pytest.mark.parametrize("name,noise", [("bot.json", 0.0), ("noisy_bot.json", 0.3)])
def test_graph_files_resolve(name: str, noise: float) -> None:
    graph = json.loads((GRAPHS / name).read_text(encoding="utf-8"))
    assert graph["nodesets"]["policy"]["params"]["noise"] == noise
    for nodeset_name, spec in graph["nodesets"].items():
        cls = import_impl(spec["impl"])
        cls(**spec["params"]).close()
        ops = {n["op"] for n in graph["nodes"].values() if n["nodeset"] == nodeset_name}
        assert ops <= set(cls.node_specs())
