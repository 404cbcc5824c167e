"""Issue 25 through a real backend: a bad param or a broken user module is a 422 with one
line (and ``submit`` exits 2 with it), nothing written; ``ls`` piped at 80 columns keeps
every run id whole; ``logs --follow`` ends with the run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from apihelpers import Backend, bot_spec, wait_until

from evaltui.cli import main
from evaltui.contract.states import RunState
from evaltui.rundir.layout import episode_dir


@pytest.fixture
def cli(backend: Backend, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("BACKEND_URL", backend.url)
    monkeypatch.setenv("COLUMNS", "80")

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def nothing_written(outputs: Path) -> bool:
    runs = outputs / "eval_runs"
    return not runs.exists() or not any(runs.iterdir())


def test_an_out_of_bounds_param_is_422_and_submit_exits_2_in_one_line(
        cli, backend: Backend, api_env: dict[str, Path]) -> None:
    spec = bot_spec(2)
    spec["eval"]["selectors"] = {"policy.noise": 5}
    answer = backend.http().post("/runs", json=spec)
    assert answer.status_code == 422
    body = answer.json()
    assert body["field"] == "graph.nodesets.policy.params.noise"
    assert "less than or equal to 1" in body["detail"] and "\n" not in body["detail"]
    code, _, err = cli("submit", "bot", "--set", "policy.noise=5")
    assert code == 2
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    assert "policy.params.noise: Input should be less than or equal to 1" in err
    assert nothing_written(api_env["outputs"])


def test_a_user_module_failing_at_import_is_a_422_naming_its_line(
        backend: Backend, api_env: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text("import os\n\nraise KeyError('HOME_DIR')\n")
    spec = bot_spec(1)
    spec["graph"]["nodesets"]["policy"]["impl"] = "mine:Policy"
    spec["active_workspace_dir"] = str(tmp_path)
    answer = backend.http().post("/runs", json=spec)
    assert answer.status_code == 422
    detail = answer.json()["detail"]
    assert f"{tmp_path / 'mine.py'}:3: KeyError: 'HOME_DIR'" in detail and "\n" not in detail
    assert nothing_written(api_env["outputs"])


def test_ls_piped_at_80_columns_keeps_every_run_id_whole(cli, backend: Backend) -> None:
    client = backend.client()
    run_ids = [client.submit(bot_spec(1)).run_id for _ in range(3)]
    for run_id in run_ids:
        assert backend.scheduler.wait(run_id, timeout=60) is RunState.DONE
    client.lock("a-colleague-debugging-interactively", 60)  # a queued run, its long reason
    waiting = client.submit(bot_spec(1)).run_id
    wait_until(lambda: client.get_run(waiting).waiting_reason, what="a waiting reason")
    code, out, _ = cli("ls")
    assert code == 0
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert len(lines) == 1 + 4  # a header, one line a run
    listed = [line.split()[:2] for line in lines[1:]]
    assert sorted(listed) == sorted([[run_id, "done"] for run_id in run_ids]
                                    + [[waiting, "queued"]])
    client.unlock("a-colleague-debugging-interactively")


def test_logs_follow_prints_until_the_run_ends(cli, backend: Backend,
                                               api_env: dict[str, Path]) -> None:
    run_id = backend.client().submit(bot_spec(1, latency_ms=30)).run_id
    log = episode_dir(api_env["outputs"] / "eval_runs" / run_id, 0) / "log.jsonl"
    wait_until(log.exists, timeout=60, what="the episode's log")
    code, out, err = cli("logs", run_id, "0", "--follow", "--json")
    assert code == 0, err
    assert backend.client().get_run(run_id).state.terminal
    events = [json.loads(line)["event"] for line in out.splitlines()]
    assert events[0] == "episode_start" and events[-1] == "episode_end"


def test_logs_follow_waits_for_an_episode_that_has_not_begun(backend: Backend, popen) -> None:
    client = backend.client()
    client.lock("a-colleague", 60)  # the run waits in the queue: its episode has no log yet
    run_id = client.submit(bot_spec(1)).run_id
    proc = popen([sys.executable, "-m", "evaltui.cli", "logs", run_id, "0", "--follow",
                  "--json", "--url", backend.url], stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text=True)
    wait_until(lambda: client.get_run(run_id).waiting_reason, what="the run to wait")
    assert proc.poll() is None  # still following, not "has no log"
    client.unlock("a-colleague")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    events = [json.loads(line)["event"] for line in out.splitlines()]
    assert events[0] == "episode_start" and events[-1] == "episode_end"


def test_submit_prints_the_notes_of_the_nodesets_own_checks(
        cli, backend: Backend, tmp_path: Path) -> None:
    """What a nodeset's ``check_params`` found (Meta-World's renderer probe says which
    backend works and what a frame costs) reaches ``submit`` as ``eval`` prints it."""
    (tmp_path / "noted.py").write_text(
        "from evaltui.benchmarks.babyai.bot import BabyAIBotPolicy\n\n\n"
        "class NotedBot(BabyAIBotPolicy):\n"
        "    @classmethod\n"
        "    def check_params(cls, params):\n"
        "        return 'the probe found a working renderer'\n")
    spec = bot_spec(1)
    spec["graph"]["nodesets"]["policy"]["impl"] = "noted:NotedBot"
    spec["active_workspace_dir"] = str(tmp_path)
    assert backend.client().submit(spec).notes == ["the probe found a working renderer"]
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    code, _, err = cli("submit", str(tmp_path / "spec.json"))
    assert code == 0
    assert "note: the probe found a working renderer" in err
