"""The replay screen on a real BabyAI episode whose frames are tile ids in frames.bin."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tuihelpers import SIZE, wait_for

from evaltui.benchmarks.babyai import load_manifest
from evaltui.benchmarks.babyai.minigrid_import import make_env
from evaltui.engine.episode.logger import ExecutionLogger
from evaltui.engine.episode.loop import LoopRunner
from evaltui.engine.graph.definition import GraphDefinition
from evaltui.rundir.logread import iter_log
from evaltui.runview.frames import FrameRef
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.widgets.frame_view import FrameView
from evaltui.tui.widgets.halfblock import _pixels

pytestmark = pytest.mark.anyio
GRAPH = Path(__file__).resolve().parents[2] / "evaltui" / "graphs" / "bot.json"


@pytest.fixture()
def ep_dir(tmp_path: Path) -> Path:
    """One GoToLocal bot episode logged by the real LoopRunner and ExecutionLogger."""
    graph = GraphDefinition.from_dict(json.loads(GRAPH.read_text()))
    classes = graph.check()
    specs = {n: classes[nd.nodeset].node_specs()[nd.op] for n, nd in graph.nodes.items()}
    registry = {n: classes[n](**ns.params) for n, ns in graph.nodesets.items()}
    episode = next(e for e in load_manifest("GoToLocal", 20) if e["geodesic_distance"] >= 4)
    ep = tmp_path / "ep0000"
    with ExecutionLogger(ep) as logger:
        outcome = LoopRunner(graph, specs, step_budget=100).run_episode(episode, registry,
                                                                        logger)
    assert outcome.status.value == "ok" and outcome.step_count >= 4
    (ep / "episode.json").write_text(json.dumps({"episode_index": 0, "status": "ok",
                                                 "episode_id": episode["episode_id"],
                                                 "step_count": outcome.step_count}))
    return ep


def minigrid_frames(ep: Path) -> list[np.ndarray]:
    """get_frame of the reset and of each logged step, re-simulated."""
    record = next(rec for _, rec in iter_log(ep / "log.jsonl"))
    episode = next(e for e in load_manifest("GoToLocal", 20)
                   if e["episode_id"] == record["inputs"]["episode_id"])
    env = make_env(episode["env_id"])
    with redirect_stdout(io.StringIO()):
        env.reset(seed=episode["seed"])
    frames = [env.unwrapped.get_frame(highlight=False, tile_size=8)]
    for _, rec in iter_log(ep / "log.jsonl"):
        if rec["event"] == "fire" and rec["node"] == "env_step":
            env.step(rec["inputs"]["action"])
            frames.append(env.unwrapped.get_frame(highlight=False, tile_size=8))
    env.close()
    return frames


async def test_frames_shown_are_minigrid_s(ep_dir: Path, app_factory, tmp_path: Path) -> None:
    expected = minigrid_frames(ep_dir)
    app = app_factory(replay_dir=ep_dir)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        view = screen.query_one(FrameView)
        for step in range(3):
            await wait_for(lambda s=step: view.path is not None and view.path.step == s,
                           what=f"the frame of step {step}")
            ref = view.path
            assert ref is not None and ref.path.name == "frames.bin" and ref.at is not None
            assert view.caption == ref.name  # the step's own frame
            assert np.array_equal(ref.pixels(), expected[step])
            # The half-block cells are exactly those of minigrid's frame as a PNG.
            png = tmp_path / f"minigrid{step}.png"
            Image.fromarray(expected[step]).save(png)
            assert _pixels(ref, ref.stamp(), 40, 12) == \
                _pixels(FrameRef(png, step), 0, 40, 12)
            await pilot.press("right")
