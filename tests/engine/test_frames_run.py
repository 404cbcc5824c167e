"""Frames of real runs: stored as tile ids, identical to minigrid's, and safe from a kill.

Every frame an ep dir's log.jsonl refers to is read back through the replay viewer's
reader and compared with ``get_frame(highlight=False)`` of the same episode re-simulated
from the logged actions, in a fresh env of this process.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import psutil
import pytest
from runhelpers import builtin_graph, episode_rows, run_to_end, running, wait_until

from evaltui.benchmarks.babyai import SPLITS, load_manifest
from evaltui.benchmarks.babyai.minigrid_import import make_env
from evaltui.engine.episode.logger import ExecutionLogger
from evaltui.engine.nodes import Frame
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.logread import iter_log
from evaltui.runview.gif import episode_frames, export_gif
from evaltui.runview.replay import EpisodeReplay

TILE = 8


def spec(split: str, episodes: int, **env: object) -> dict:
    graph = builtin_graph("bot", **{f"env__{k}": v for k, v in env.items()})
    return {"graph": graph, "eval": {"dataset": "babyai", "split": split,
                                      "episode_count": episodes, "worker_count": 1}}


def check_frames_against_minigrid(ep_dir: Path, split: str, index: int) -> int:
    """Re-simulate the logged actions; every logged frame must equal get_frame's.

    Returns the number of frames compared."""
    episode = load_manifest(split, index + 1)[index]
    env = make_env(SPLITS[split])
    with redirect_stdout(io.StringIO()):
        env.reset(seed=int(episode["seed"]))
    sim = env.unwrapped
    compared = 0
    for _, record in iter_log(ep_dir / "log.jsonl"):
        if record["event"] == "fire" and record["node"] == "env_step":
            env.step(int(record["inputs"]["action"]))
        stand_in = (record.get("outputs") or {}).get("frame")
        if not stand_in or record["event"] not in ("episode_start", "fire"):
            continue
        assert stand_in["$frame"] == "frames.bin", stand_in
        replay_frame = EpisodeReplay(ep_dir)
        replay_frame.index.scan()
        ref = replay_frame.frame_of(record["step"])
        assert ref is not None and ref.at == stand_in["at"] and ref.step == record["step"]
        want = sim.get_frame(highlight=False, tile_size=TILE)
        assert np.array_equal(ref.pixels(), want), f"step {record['step']}"
        compared += 1
    env.close()
    return compared


def test_a_copied_ep_dir_replays_frames_identical_to_minigrid(tmp_path: Path) -> None:
    run_dir = run_to_end(spec("GoToObjMaze", 2, frame_stride=1), tmp_path / "out")
    rows = episode_rows(run_dir)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    copy = tmp_path / "elsewhere" / "ep0001"
    shutil.copytree(run_dir / "episodes" / "ep0001", copy)
    shutil.rmtree(run_dir)  # nothing outside the copy is needed
    assert (copy / "frames.bin").is_file() and not (copy / "assets").exists()
    compared = check_frames_against_minigrid(copy, "GoToObjMaze", 1)
    assert compared == rows[1]["step_count"] + 1  # the reset's frame and one a step
    assert len(episode_frames(copy)) == compared
    assert export_gif(copy, tmp_path / "ep.gif") == compared


def test_a_worker_killed_mid_episode_loses_no_logged_frame(tmp_path: Path) -> None:
    run = spec("GoToObjMaze", 2, frame_stride=1, sim_latency_ms=15.0)
    with running(run, tmp_path / "out") as (run_dir, proc):
        log = run_dir / "episodes" / "ep0000" / "log.jsonl"
        wait_until(lambda: log.is_file() and log.read_bytes().count(b"\n") >= 25,
                   what="episode 0 to log 25 records")
        writers = [p for p in psutil.Process(proc.pid).children(recursive=True)
                   if any(Path(f.path) == log for f in p.open_files())]
        assert len(writers) == 1  # the worker: whatever way it was started, it holds the log
        os.kill(writers[0].pid, signal.SIGKILL)
        assert proc.wait(timeout=60) == 0
    row = read_json(run_dir / "episodes" / "ep0000" / "episode.json")
    assert row["status"] == "error" and "worker died" in row["error"]
    compared = check_frames_against_minigrid(log.parent, "GoToObjMaze", 0)
    assert compared >= 12  # the steps logged before the kill, each with its frame


def test_plain_frames_are_pngs_written_before_close_returns(tmp_path: Path) -> None:
    colours = [np.full((6, 4, 3), v, np.uint8) for v in (10, 120, 240)]
    with ExecutionLogger(tmp_path / "ep0000") as logger:
        assert not (tmp_path / "ep0000" / "assets").exists()  # created at the first frame
        for step, pixels in enumerate(colours):
            logger.record("fire", step=step, node="env_step", outputs={"frame": Frame(pixels)})
            pixels[:] = 0  # the env may reuse its buffer: the logger kept a copy
            logger.flush()
    refs = episode_frames(tmp_path / "ep0000")
    assert [r.name for r in refs] == [f"step{s:05d}_env_step_{s + 1:05d}.png" for s in range(3)]
    for ref, value in zip(refs, (10, 120, 240), strict=True):
        assert ref.at is None and (ref.pixels() == value).all()


@pytest.mark.parametrize("stride", [0, 3])
def test_frame_stride(tmp_path: Path, stride: int) -> None:
    run_dir = run_to_end(spec("GoToLocal", 2, frame_stride=stride), tmp_path)
    for row in episode_rows(run_dir):
        ep = run_dir / "episodes" / f"ep{row['episode_index']:04d}"
        frames = episode_frames(ep)
        assert [f.step for f in frames] == ([] if not stride else
                                            list(range(0, row["step_count"] + 1, stride)))
        assert (ep / "frames.bin").exists() == bool(stride)
        assert not (ep / "assets").exists()
