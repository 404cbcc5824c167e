"""``evaltui submit | ls | show | cancel | resume | logs`` and ApiClient against a backend."""

from __future__ import annotations

import json
import socket

import pytest
from apihelpers import Backend, bot_spec

from evaltui.api.client import (
    ApiClient,
    AuthError,
    BackendUnavailable,
    Conflict,
    InvalidRequest,
    NotFound,
)
from evaltui.cli import main
from evaltui.rundir.jsonfiles import read_json, write_json_atomic
from evaltui.rundir.layout import episode_dir


@pytest.fixture
def cli(backend: Backend, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("BACKEND_URL", backend.url)

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_submit_wait_ls_show_logs(cli, backend: Backend) -> None:
    code, out, err = cli("submit", "bot", "--episodes", "2", "--priority", "5", "--wait",
                         "--json")
    assert code == 0, err
    run = json.loads(out)
    assert run["state"] == "done" and run["summary"]["episodes_finished"] == 2
    assert run["scheduler"]["priority"] == 5
    run_id = run["run_id"]
    code, out, _ = cli("ls", "--json")
    assert code == 0 and [r["run_id"] for r in json.loads(out)] == [run_id]
    code, out, _ = cli("ls")
    assert code == 0 and run_id in out and "done" in out and "babyai-bot" in out
    code, out, _ = cli("show", run_id, "--episodes")
    assert code == 0 and "success" in out and "GoToLocal" in out
    code, out, _ = cli("show", run_id, "--episodes", "--json")
    assert [e["episode_index"] for e in json.loads(out)["episodes"]] == [0, 1]
    code, out, _ = cli("logs", run_id, "0")
    assert code == 0 and out.splitlines()[0].split()[1] == "episode_start"
    code, out, _ = cli("logs", run_id, "0", "--json")
    records = [json.loads(line) for line in out.splitlines()]
    assert records[0]["event"] == "episode_start" and records[-1]["event"] == "episode_end"


def test_submit_without_wait_then_cancel_and_resume(cli, backend: Backend) -> None:
    backend.client().lock("tester", 60)
    code, out, _ = cli("submit", "bot", "--episodes", "2", "--json")
    run_id = json.loads(out)["run_id"]
    assert code == 0 and json.loads(out)["state"] == "queued"
    code, out, _ = cli("cancel", run_id)
    assert code == 0 and "cancelled" in out
    code, _, err = cli("cancel", run_id, "20250101_000000")
    # An unknown run id is an input error (2), as in every command; the worst code wins.
    assert code == 2 and "already cancelled" in err and "no run" in err
    assert all(line.startswith("error: cancel ") for line in err.splitlines())
    backend.client().unlock("tester")
    code, out, err = cli("resume", run_id, "--json")
    assert code == 0, err
    assert json.loads(out) == [{"run_id": run_id, "state": "queued"}]


def test_cancel_of_a_running_run_says_it_was_asked(cli, backend: Backend) -> None:
    """``run …: running`` read as a refusal: it says the cancel was asked, and of what."""
    from apihelpers import wait_until

    client = backend.client()
    run_id = client.submit(bot_spec(20, latency_ms=200)).run_id
    wait_until(lambda: client.get_run(run_id).state.value == "running", what="running")
    run_dir = client.get_run(run_id).run_dir
    code, out, err = cli("cancel", str(run_dir))  # a run dir names its run, as everywhere
    assert code == 0, err
    assert out.strip().startswith(f"run {run_id}: cancel asked; it is running until its "
                                  "process stops"), out
    wait_until(lambda: client.get_run(run_id).state.terminal, what="the run to stop")


def test_cli_errors_say_what_to_do(cli, backend: Backend, monkeypatch) -> None:
    code, _, err = cli("submit", "bot", "--episodes", "0")
    assert code == 2 and "eval.episode_count" in err
    code, _, err = cli("submit", "no-such-graph")
    assert code == 2 and "target" in err
    code, _, err = cli("show", "nope")
    assert code == 2 and err.startswith("error: ") and "no run 'nope'" in err
    code, _, err = cli("ls", "--url", f"http://127.0.0.1:{_free_port()}")
    assert code == 1 and "no backend at" in err and "evaltui serve" in err
    monkeypatch.setenv("EVALTUI_TOKEN", "not-the-token-at-all")
    code, _, err = cli("ls")
    assert code == 1 and "token rejected" in err and "EVALTUI_TOKEN" in err


def test_client_errors_are_typed(backend: Backend, api_env: dict) -> None:
    client = backend.client()
    with pytest.raises(NotFound):
        client.get_run("20250101_000000")
    with pytest.raises(NotFound):
        client.get_run("../../etc/passwd")
    with pytest.raises(InvalidRequest) as bad:
        client.submit({"graph": {"name": "x"}, "eval": {"worker_count": 0}})
    assert bad.value.field == "eval.worker_count" and bad.value.status == 422
    client.lock("a")
    with pytest.raises(Conflict):
        client.lock("b")
    assert client.unlock("a") is True
    wrong = ApiClient(backend.url, "x" * 40)
    with pytest.raises(AuthError) as denied:
        wrong.queue()
    assert "token rejected" in str(denied.value)
    (api_env["state"] / "token").unlink()
    missing = ApiClient(backend.url)
    with pytest.raises(AuthError) as denied:
        missing.queue()
    assert str(api_env["state"] / "token") in str(denied.value) and "missing" in str(denied.value)
    assert missing.health().status == "ok"  # the one open route
    nobody = ApiClient(f"http://127.0.0.1:{_free_port()}")
    with pytest.raises(BackendUnavailable) as gone:
        nobody.queue()
    assert "start one with `evaltui serve`" in str(gone.value)
    for c in (wrong, missing, nobody):
        c.close()


def test_client_reads_episode_rows_written_after_the_summary(backend: Backend) -> None:
    client = backend.client()
    run_id = client.submit(bot_spec(2)).run_id
    assert backend.scheduler.wait(run_id, timeout=30).value == "done"
    run_dir = backend.scheduler.runs_root / run_id
    # An episode finished after the last summary.json write is still listed.
    summary = read_json(run_dir / "summary.json")
    summary["episodes"] = summary["episodes"][:1]
    write_json_atomic(run_dir / "summary.json", summary)
    assert (episode_dir(run_dir, 1) / "episode.json").exists()
    assert [r.episode_index for r in client.episodes(run_id)] == [0, 1]
    assert [r.episode_index for r in client.episodes(run_id, status="ok", limit=1)] == [0]
