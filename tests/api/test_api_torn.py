"""Torn files over the API and its CLI clients: a torn episode.json is
"unreadable", never "not finished"; a cut last log line is shown as torn once its episode
is over (and left alone while it may still be mid-append)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from apihelpers import Backend, bot_spec

from evaltui.cli import main
from evaltui.contract.states import RunState
from evaltui.rundir.layout import episode_dir, runs_root


@pytest.fixture
def run_dir(backend: Backend) -> Path:
    """A real finished two-episode run whose summary predates episode 1 (a killed run)."""
    sched = backend.scheduler
    run_id, _ = sched.submit(bot_spec(2))
    assert sched.wait(run_id, 60) is RunState.DONE
    path = runs_root(sched.outputs) / run_id
    summary = json.loads((path / "summary.json").read_text())
    summary["episodes"] = [r for r in summary["episodes"] if r["episode_index"] == 0]
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def test_a_torn_episode_json_is_unreadable_not_unfinished(backend: Backend,
                                                          run_dir: Path) -> None:
    """A torn episode.json reads as unreadable, not as "has not finished"."""
    episode = episode_dir(run_dir, 1) / "episode.json"
    episode.write_bytes(episode.read_bytes()[:50])
    http = backend.http()
    one = http.get(f"/runs/{run_dir.name}/episodes/1")
    assert one.status_code == 200 and one.json()["status"] == "unreadable"
    assert "episode.json is unreadable" in one.json()["error"]
    rows = http.get(f"/runs/{run_dir.name}/episodes").json()
    assert [r["status"] for r in rows] == ["ok", "unreadable"]
    episode.unlink()  # no episode.json at all: that one has not finished
    answer = http.get(f"/runs/{run_dir.name}/episodes/1")
    assert answer.status_code == 404 and "has not finished" in answer.text


def test_a_torn_last_log_line_is_shown_once_the_episode_is_over(
        backend: Backend, run_dir: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A cut last log line is shown as torn, not dropped silently."""
    log = episode_dir(run_dir, 1) / "log.jsonl"
    data = log.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    log.write_bytes(data[: last_start + 30])  # the last line cut after 30 bytes
    http = backend.http()
    page = http.get(f"/runs/{run_dir.name}/episodes/1/log").json()
    *whole, torn = page["records"]
    assert torn["offset"] == last_start and torn["record"]["event"] == "torn"
    assert "torn last line: 30 bytes" in torn["record"]["error"]
    assert page["complete"] and page["next_offset"] == last_start
    assert all(r["record"]["event"] != "torn" for r in whole)
    # A page that stops before the end has no torn record; the next one does.
    first = http.get(f"/runs/{run_dir.name}/episodes/1/log", params={"limit": 1}).json()
    assert not first["complete"] and first["records"][0]["record"]["event"] == "episode_start"

    monkeypatch.setenv("BACKEND_URL", backend.url)
    assert main(["logs", run_dir.name, "1"]) == 0
    assert "torn last line: 30 bytes" in capsys.readouterr().out.splitlines()[-1]

    # While episode.json is not written the writer may be mid-line: nothing is shown.
    (episode_dir(run_dir, 1) / "episode.json").unlink()
    live = http.get(f"/runs/{run_dir.name}/episodes/1/log").json()
    assert [r["record"] for r in live["records"]] == [r["record"] for r in whole]
    assert live["next_offset"] == last_start


def test_a_damaged_episode_json_reads_unreadable_in_the_list_too(
        backend: Backend, run_dir: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Episode 0 has an ok row in summary.json, but its episode.json is damaged: the list
    route and ``show --episodes`` say what the single-episode route says."""
    episode = episode_dir(run_dir, 0) / "episode.json"
    episode.write_bytes(episode.read_bytes()[:50])
    http = backend.http()
    one = http.get(f"/runs/{run_dir.name}/episodes/0").json()
    assert one["status"] == "unreadable"
    rows = http.get(f"/runs/{run_dir.name}/episodes").json()
    assert [r["status"] for r in rows] == ["unreadable", "ok"]
    assert rows[0]["error"] == one["error"]
    monkeypatch.setenv("BACKEND_URL", backend.url)
    assert main(["show", run_dir.name, "--episodes"]) == 0
    assert "unreadable" in capsys.readouterr().out
    assert main(["show", str(run_dir), "--episodes"]) == 0  # the run dir, read offline
    assert "unreadable" in capsys.readouterr().out
