"""The headless models under the TUI: line index, episode replay, run watcher."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from runfixtures import log_records, write_episode, write_summary

from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.rundir.layout import episode_dir
from evaltui.runview.logindex import LineIndex
from evaltui.runview.replay import EpisodeReplay
from evaltui.runview.runmodel import RunModel
from evaltui.runview.watcher import RunWatcher

# --- LineIndex ---------------------------------------------------------------------------


def write_lines(path: Path, lines: list[str], tail: str = "") -> None:
    path.write_text("".join(line + "\n" for line in lines) + tail)


def test_index_skips_a_partial_last_line_until_it_ends(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    write_lines(log, ['{"step": 0}', '{"step": 1}'], tail='{"step": 2, "ev')
    index = LineIndex(log)
    assert index.scan() == 2 and index.complete
    assert index.record(1) == {"step": 1}
    with open(log, "a") as fh:
        fh.write('ent": "fire"}\n{"step": 3}\n')
    assert index.scan() == 2
    assert [index.record(i)["step"] for i in range(len(index))] == [0, 1, 2, 3]


def test_index_across_chunks_long_lines_blank_lines_and_garbage(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    long_value = "x" * 300
    lines = [json.dumps({"step": i, "v": long_value if i % 7 == 0 else i}) for i in range(200)]
    lines.insert(50, "")
    lines.insert(120, "not json at all")
    write_lines(log, lines)
    index = LineIndex(log, chunk_bytes=64)  # smaller than many lines: the chunk grows
    index.scan(max_bytes=500)
    assert 0 < len(index) < 201 and not index.complete
    index.scan()
    assert len(index) == 201 and index.complete  # the blank line is not a record
    assert index.record(119)["event"] == "corrupt"
    assert [r["step"] for r in index.records(0, 5)] == [0, 1, 2, 3, 4]
    assert index.record(200)["step"] == 199


def test_index_finds_error_records(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    recs = log_records(0, 6, error_step=4)
    write_lines(log, [json.dumps(r, separators=(",", ":")) for r in recs])
    index = LineIndex(log)
    index.scan()
    errors = index.error_lines()
    assert [index.record(i)["event"] for i in errors] == ["error"]


def test_index_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    index = LineIndex(tmp_path / "nope.jsonl")
    assert index.scan() == 0 and len(index) == 0


# --- EpisodeReplay -----------------------------------------------------------------------


def test_replay_steps_firings_frames(tmp_path: Path) -> None:
    run_dir = tmp_path / "20260101_000000"
    write_episode(run_dir, 0, steps=5)
    replay = EpisodeReplay(episode_dir(run_dir, 0))
    replay.index.scan()
    assert replay.episode["episode_id"] == "GoToLocal-0000" and replay.episode_error is None
    assert replay.last_step == 5
    assert list(replay.step_lines(0)) == [0]
    firings, total = replay.firings(3)
    assert total == 2 and [f.record["node"] for f in firings] == ["policy", "env_step"]
    assert replay.frame_of(3).name == "step00003_env_step_00004.png"
    assert replay.frame_of(0).name == "step00000_episode_start_00001.png"
    assert replay.error_steps() == []
    assert replay.next_error_step(0) is None


def test_replay_of_an_errored_episode_and_its_fallback_frame(tmp_path: Path) -> None:
    run_dir = tmp_path / "20260101_000000"
    write_episode(run_dir, 5)  # fails at step 2
    replay = EpisodeReplay(episode_dir(run_dir, 5))
    replay.index.scan()
    assert replay.error_steps() == [2]
    assert replay.next_error_step(0) == 2 and replay.next_error_step(2) == 2  # wraps
    firings, _ = replay.firings(2)
    assert [f.is_error for f in firings] == [False, True, False]
    assert replay.frame_of(2).name == "step00001_env_step_00002.png"  # none at step 2


def test_replay_never_follows_a_frame_out_of_its_dir(tmp_path: Path) -> None:
    ep = tmp_path / "ep0000"
    ep.mkdir()
    (tmp_path / "secret.png").write_bytes(b"x")
    rec = {"step": 0, "event": "episode_start", "outputs": {"frame": {"$frame": "../secret.png"}}}
    (ep / "log.jsonl").write_text(json.dumps(rec) + "\n")
    replay = EpisodeReplay(ep)
    replay.index.scan()
    assert replay.frame_of(0) is None
    assert "not written yet" in (replay.episode_error or "")


def test_replay_with_corrupt_episode_json_still_reads_the_log(tmp_path: Path) -> None:
    run_dir = tmp_path / "20260101_000000"
    write_episode(run_dir, 1)
    ep = episode_dir(run_dir, 1)
    (ep / "episode.json").write_text("[1, 2")
    replay = EpisodeReplay(ep)
    replay.index.scan()
    assert "unreadable" in (replay.episode_error or "") and replay.last_step == 4


# --- RunWatcher ----------------------------------------------------------------------------


def watch(run_dir: Path, **kwargs: object) -> tuple[RunModel, RunWatcher, threading.Event]:
    model, changed = RunModel(), threading.Event()
    watcher = RunWatcher(run_dir, model, changed.set, **kwargs)  # type: ignore[arg-type]
    watcher.start()
    return model, watcher, changed


def wait(cond, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.parametrize("polling", [False, True])
def test_watcher_reads_then_follows_episodes_and_summary(tmp_path: Path, polling: bool) -> None:
    run_dir = tmp_path / "20260101_000000"
    rows = [write_episode(run_dir, i) for i in range(3)]
    write_summary(run_dir, rows[:2], status="running", total=10)  # summary lags episode 2
    model, watcher, _ = watch(run_dir, force_polling=polling, poll_interval=0.05)
    try:
        wait(lambda: len(model) == 3)
        first = model.take_changes()
        assert [r["episode_index"] for r in first.rows] == [0, 1, 2]
        assert first.status is not None and first.status.summary["status"] == "running"
        time.sleep(0.3)  # let the watch start
        write_episode(run_dir, 3)
        wait(lambda: model.known(3))
        write_summary(run_dir, rows + [{**rows[0], "episode_index": 4}], status="done",
                      total=10)
        wait(lambda: model.known(4))  # filled from summary.json's rows
        changes = model.take_changes()
        assert {r["episode_index"] for r in changes.rows} == {3, 4}
    finally:
        watcher.close()
    assert not watcher.is_alive()


def test_watcher_badges_a_corrupt_episode_and_clears_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "20260101_000000"
    row = write_episode(run_dir, 0)
    (episode_dir(run_dir, 0) / "episode.json").write_text("{oops")
    model, watcher, _ = watch(run_dir)
    try:
        wait(lambda: "ep0000/episode.json" in model.take_changes().errors)
        # "unreadable", never "not finished" (no row at all).
        assert [r["status"] for r in model.rows()] == ["unreadable"]
        assert "unreadable" in model.rows()[0]["error"]
        time.sleep(0.3)
        write_json_atomic(episode_dir(run_dir, 0) / "episode.json", row)
        wait(lambda: model.known(0, usable=True))
        assert model.take_changes().errors == {} and model.rows() == [row]
    finally:
        watcher.close()


def test_run_model_reports_each_change_once() -> None:
    model = RunModel()
    assert model.upsert_rows([{"episode_index": 1, "status": "ok"}]) == 1
    assert model.upsert_rows([{"episode_index": 1, "status": "ok"}]) == 0
    assert model.upsert_rows([{"episode_index": 1, "status": "error"}], only_new=True) == 0
    assert [r["episode_index"] for r in model.take_changes().rows] == [1]
    assert not model.take_changes()


# --- import hygiene --------------------------------------------------------------------------


@pytest.mark.parametrize("module", ["evaltui.runview.logindex", "evaltui.runview.replay",
                                    "evaltui.runview.watcher", "evaltui.runview.runmodel",
                                    "evaltui.cli"])
def test_headless_modules_do_not_import_textual(module: str) -> None:
    code = (f"import sys, {module}; bad = [m for m in sys.modules "
            "if m.split('.')[0] == 'textual' or m.startswith('evaltui.tui')]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_a_run_dir_given_relative_to_the_working_dir_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``evaltui open outputs/eval_runs/RUN`` as typed: the episode files are read, and the
    scheduler's episode watch reads their status the same way."""
    from evaltui.runview.watcher import read_episode_file
    from evaltui.scheduler.runs.episodes import _status

    rows = [write_episode(tmp_path / "runs" / "20260101_000000", i) for i in range(2)]
    monkeypatch.chdir(tmp_path)
    path = Path("runs/20260101_000000/episodes/ep0001/episode.json")
    row, why = read_episode_file(path)
    assert why is None and row == rows[1]
    assert _status(path) == rows[1]["status"]
