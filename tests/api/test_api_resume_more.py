"""``evaltui submit --stop-when`` and ``evaltui resume --more`` against a real backend: the
CLI, the client, the route and the scheduler carry ``more``; a run that did not stop by a
rule is refused (409, one line)."""

from __future__ import annotations

import json

import pytest
from apihelpers import Backend

from evaltui.cli import main
from evaltui.contract.states import RunState


@pytest.fixture
def cli(backend: Backend, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("BACKEND_URL", backend.url)

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_resume_more_continues_a_stopped_run_through_the_api(cli, backend: Backend) -> None:
    code, out, err = cli("submit", "bot", "--episodes", "40", "--stop-when",
                         "success:width<=0.6", "--wait", "--json")
    assert code == 0, err
    run = json.loads(out)
    stopped = run["summary"]["stopped"]
    assert run["state"] == "done" and stopped["n"] < 40
    code, _, err = cli("resume", run["run_id"], "--more", "3")
    assert code == 0, err
    assert backend.scheduler.wait(run["run_id"], timeout=60) is RunState.DONE
    code, out, _ = cli("show", run["run_id"], "--json")
    after = json.loads(out)["summary"]
    assert after["stopped"]["n"] == stopped["n"] + 3 == after["episodes_finished"]
    code, out, err = cli("submit", "bot", "--episodes", "2", "--wait", "--json")
    plain = json.loads(out)["run_id"]
    code, _, err = cli("resume", plain, "--more")
    assert code == 1 and "did not stop by a rule" in err
