"""Untrusted run-dir files in the TUI's headless models: no symlink out of the run dir
is followed, a torn summary is rebuilt and said to be, a torn episode.json is unreadable
(not "not finished"), a torn last log line of a finished episode is shown as torn."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest
from runfixtures import write_episode, write_summary

from evaltui.cli import main
from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.rundir.layout import episode_dir
from evaltui.runview.replay import EpisodeReplay
from evaltui.runview.runmodel import RunModel
from evaltui.runview.watcher import LEAVES, RunWatcher

SECRET = "secret-outside-the-outputs-root"


def watched(run_dir: Path, until, timeout: float = 5.0) -> RunModel:
    """Watch ``run_dir`` until ``until(model)`` holds (polling: no inotify timing)."""
    model, changed = RunModel(), threading.Event()
    watcher = RunWatcher(run_dir, model, changed.set, force_polling=True, poll_interval=0.05)
    watcher.start()
    try:
        deadline = time.monotonic() + timeout
        while not until(model):
            assert time.monotonic() < deadline, (model.rows(), model.take_changes().errors)
            time.sleep(0.01)
        return model
    finally:
        watcher.close()


def a_run(root: Path, name: str = "20260101_000000", episodes: int = 3) -> Path:
    run_dir = root / "eval_runs" / name
    rows = [write_episode(run_dir, i) for i in range(episodes)]
    write_summary(run_dir, rows, status="done", total=episodes)
    write_json_atomic(run_dir / "scheduler.json", {"state": "done", "exit_code": 0})
    return run_dir


@pytest.fixture
def secret_run(tmp_path: Path) -> Path:
    """A run outside the outputs root with the secret in every JSON file."""
    run = a_run(tmp_path / "elsewhere")
    for path in run.rglob("*.json"):
        data = json.loads(path.read_text())
        data.update({"secret": SECRET, "graph_name": SECRET, "error": SECRET})
        path.write_text(json.dumps(data))
    for path in run.rglob("log.jsonl"):
        path.write_text(json.dumps({"step": 0, "event": "fire", "error": SECRET}) + "\n")
    return run


def _plant(run_dir: Path, rel: str, target: Path) -> None:
    path = run_dir / rel if rel else run_dir
    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    path.symlink_to(target)


# --- the run watcher -------------------------------------------------------------------------


@pytest.mark.parametrize("rel", ["", "summary.json", "scheduler.json", "episodes"])
def test_a_run_with_a_symlink_out_at_its_top_is_not_read(tmp_path: Path, secret_run: Path,
                                                         rel: str) -> None:
    run_dir = a_run(tmp_path / "outputs")
    _plant(run_dir, rel, secret_run / rel if rel else secret_run)
    model = watched(run_dir, lambda m: "run" in m.take_changes().errors)
    changes = model.take_changes()
    assert LEAVES in changes.errors["run"]
    assert SECRET not in json.dumps([model.rows(), changes.errors, str(model.status)])


@pytest.mark.parametrize("rel", ["episodes/ep0001/episode.json", "episodes/ep0001"])
def test_an_episode_symlinked_out_is_an_unreadable_row(tmp_path: Path, secret_run: Path,
                                                       rel: str) -> None:
    run_dir = a_run(tmp_path / "outputs")
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["episodes"] = summary["episodes"][:1]  # episodes 1 and 2 come from their files
    write_json_atomic(run_dir / "summary.json", summary)
    _plant(run_dir, rel, secret_run / rel)
    model = watched(run_dir, lambda m: len(m.rows()) == 3)
    rows = model.rows()
    assert [r["status"] for r in rows] == ["ok", "unreadable", "ok"]
    assert LEAVES in rows[1]["error"] and SECRET not in json.dumps(rows)


def test_a_torn_summary_is_rebuilt_and_said_to_be(tmp_path: Path) -> None:
    """A torn summary is rebuilt from its 400 rows, not shown as "no metrics yet"."""
    run_dir = a_run(tmp_path / "outputs", episodes=4)
    (run_dir / "_DONE").touch()
    summary = run_dir / "summary.json"
    summary.write_bytes(summary.read_bytes()[:120])
    model = watched(run_dir, lambda m: m.status is not None and len(m.rows()) == 4)
    status, errors = model.status, model.take_changes().errors
    assert status is not None and status.state.value == "done"
    assert status.summary and status.summary["metrics"]["success"] is not None
    assert status.summary["summary_unreadable"]
    assert "summary.json is unreadable: rows and metrics rebuilt" in errors["summary"]


# --- the replay ------------------------------------------------------------------------------


def test_a_torn_last_line_shows_once_the_episode_is_over(tmp_path: Path) -> None:
    run_dir = tmp_path / "20260101_000000"
    write_episode(run_dir, 0)
    ep = episode_dir(run_dir, 0)
    log = ep / "log.jsonl"
    episode_json = (ep / "episode.json").read_bytes()
    (ep / "episode.json").unlink()
    log.write_bytes(log.read_bytes() + b'{"step": 4, "event": "fi')  # cut mid-append
    live = EpisodeReplay(ep)
    live.index.scan()
    # Still running: the writer may be mid-line, so the partial line is not shown.
    assert live.torn_firing() is None and live.error_steps() == []
    (ep / "episode.json").write_bytes(episode_json)
    over = EpisodeReplay(ep)
    over.index.scan()
    torn = over.torn_firing()
    assert torn is not None and torn.event == "torn" and torn.is_error
    assert "torn last line: 24 bytes" in torn.record["error"]
    assert over.error_steps() == [over.last_step]
    firings, total = over.firings(over.last_step)
    assert firings[-1] == torn and total == len(firings)


@pytest.mark.parametrize("rel", ["log.jsonl", "episode.json", ""])
def test_replay_reads_nothing_through_a_symlink_out(tmp_path: Path, secret_run: Path,
                                                    rel: str) -> None:
    run_dir = a_run(tmp_path / "outputs")
    ep = episode_dir(run_dir, 1)
    secret_ep = episode_dir(secret_run, 1)
    _plant(ep, rel, secret_ep / rel if rel else secret_ep)
    replay = EpisodeReplay(ep)
    replay.index.scan()
    seen = [f.record for s in range(replay.last_step + 1) for f in replay.firings(s)[0]]
    assert SECRET not in json.dumps([seen, replay.episode, replay.episode_error])
    if rel == "log.jsonl":
        assert seen and seen[-1]["event"] == "unreadable"
        assert "symlink leaves the run dir" in seen[-1]["error"]
    elif rel == "episode.json":
        assert replay.episode_error == "episode.json is unreadable (symlink leaves the run dir)"
    else:
        assert replay.episode_error == "unreadable (symlink leaves the run dir)"
        assert len(replay.index) == 0


def test_gif_export_refuses_a_symlinked_log(tmp_path: Path, secret_run: Path, capsys) -> None:
    run_dir = a_run(tmp_path / "outputs")
    ep = episode_dir(run_dir, 0)
    _plant(ep, "log.jsonl", episode_dir(secret_run, 0) / "log.jsonl")
    assert main(["replay", str(ep), "--export", str(tmp_path / "out.gif")]) == 2
    assert "symlink that leaves the episode dir" in capsys.readouterr().err
    assert not (tmp_path / "out.gif").exists()
