"""The pool deals while results are recorded: a slow on_result holds up no worker; the
recorder makes the next episodes' dirs and empty logs ahead."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from pool_helpers import walk_graph, walk_spec

from evaltui.contract.spec import parse_spec
from evaltui.engine.executor.local.pool import EnvWorkerPool
from evaltui.engine.executor.local.worker import WorkerConfig
from evaltui.engine.executor.protocol import EpisodeResult
from evaltui.engine.executor.recorder import Recorder
from evaltui.engine.executor.watchdog import LogWatch
from evaltui.engine.graph.specchecks import check_spec
from evaltui.rundir.layout import episode_dir


def test_a_slow_recording_holds_up_no_dealing(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    spec = walk_spec(tmp_path, [1] * 8, walk_graph({"trace_dir": str(trace)}), worker_count=2)
    checked = check_spec(parse_spec(spec))
    run_dir = tmp_path / "run"
    recorded: list[tuple[int, int]] = []

    def on_result(result: EpisodeResult) -> None:
        if not recorded:
            time.sleep(1.5)  # the first episode.json takes ages (a busy disk)
        recorded.append((result.index, time.monotonic_ns()))

    with EnvWorkerPool(lambda slot: WorkerConfig(run_dir, slot, checked, {}), 2,
                       episode_log=lambda i: episode_dir(run_dir, i) / "log.jsonl") as pool:
        pool.run(range(8), on_result)
    assert sorted(i for i, _ in recorded) == list(range(8))
    started = sorted(int(p.name.split(".")[3]) for p in trace.glob("start.*"))
    assert len(started) == 8
    # Every episode was dealt and started while the first result was still being written.
    assert started[-1] < recorded[0][1]
    assert all(episode_dir(run_dir, i).is_dir() for i in range(8))


def test_dirs_made_ahead_hold_an_empty_log_and_never_truncate_one(tmp_path: Path) -> None:
    begun = episode_dir(tmp_path, 2)
    begun.mkdir(parents=True)
    (begun / "log.jsonl").write_bytes(b'{"event": "episode_start"}\n')
    watch = LogWatch(episode_dir(tmp_path, 0) / "log.jsonl")
    recorder = Recorder(lambda result: None)
    recorder.make_dirs(episode_dir(tmp_path, i) for i in range(3))
    recorder.close()
    for i in (0, 1):  # the worker's logger only opens (and truncates) it
        log = episode_dir(tmp_path, i) / "log.jsonl"
        assert log.is_file() and log.stat().st_size == 0
    assert (begun / "log.jsonl").read_bytes() == b'{"event": "episode_start"}\n'
    # The hung-episode watch reads the empty log as the env still resetting.
    assert watch.stall(time.monotonic())[0] == "reset"


def test_dirs_are_made_before_the_results_queued_ahead_of_them(tmp_path: Path) -> None:
    # The disk is busy: recording the first result takes a while, more are queued, and
    # then the pool asks for the next episode's dir, which a worker is about to need.
    entered, release = threading.Event(), threading.Event()
    seen: list[tuple[int, bool]] = []
    ahead = episode_dir(tmp_path, 9)

    def on_result(result: int) -> None:
        if result == 0:
            entered.set()
            release.wait(10)
        seen.append((result, (ahead / "log.jsonl").is_file()))

    recorder = Recorder(on_result)
    recorder.put(0)
    assert entered.wait(10)
    for result in (1, 2):
        recorder.put(result)
    recorder.make_dirs([ahead])
    release.set()
    recorder.close()
    assert seen == [(0, False), (1, True), (2, True)]


def test_frames_files_are_made_ahead_once_the_run_has_written_one(tmp_path: Path) -> None:
    recorder = Recorder(lambda result: None)
    recorder.make_dirs(episode_dir(tmp_path, i) for i in range(2))
    recorder.close()
    assert not list(tmp_path.glob("episodes/*/frames.bin"))  # no frames seen yet
    # Episode 1 wrote tiled frames; the dirs made from now on get an empty frames.bin.
    (episode_dir(tmp_path, 1) / "frames.bin").write_bytes(b"EVTFRAM2")
    recorder = Recorder(lambda result: None)
    recorder.make_dirs(episode_dir(tmp_path, i) for i in (1, 2))
    recorder.make_dirs([episode_dir(tmp_path, 3)])
    recorder.close()
    assert (episode_dir(tmp_path, 1) / "frames.bin").read_bytes() == b"EVTFRAM2"
    for i in (2, 3):
        frames = episode_dir(tmp_path, i) / "frames.bin"
        assert frames.stat().st_size == 0 and frames.stat().st_mode & 0o777 == 0o644 & ~umask()
    assert not (episode_dir(tmp_path, 0) / "frames.bin").exists()


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
