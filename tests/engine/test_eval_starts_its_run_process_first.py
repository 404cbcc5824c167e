"""``evaltui eval`` starts its run process first (``python -m evaltui.engine.main
--spec-from-stdin --reply-fd N``), hands it the spec, and the run process checks it once,
writes the run dir and answers (``evaltui.engine.run.intake``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
from runhelpers import builtin_graph, comparable, episode_rows, run_to_end

from evaltui.rundir.jsonfiles import read_json

PRESTART_FLAG = "--spec-from-stdin"


def processes_with(name: str, value: str) -> list[psutil.Process]:
    """Live processes with ``name=value`` in their environment: the run process, and its
    zygote and workers (they inherit it)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(name) == value and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def started_by(cli_pid: int) -> list[psutil.Process]:
    return processes_with("EVALTUI_PARENT_PID", str(cli_pid))


TAG = "EVALTUI_TEST_PRESTART_TAG"
"""Set in the environment of the run processes these tests start (each its own value)."""


def start_run_process(cwd: Path, **popen: Any) -> tuple[subprocess.Popen[bytes], int]:
    """The run process as ``evaltui eval`` starts it; returns it and its reply's read end."""
    read_end, write_end = os.pipe()
    env = dict(os.environ, EVALTUI_PARENT_PID=str(os.getpid()), **{TAG: str(cwd)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "evaltui.engine.main", PRESTART_FLAG, "--reply-fd",
         str(write_end)], stdin=subprocess.PIPE, pass_fds=(write_end,), cwd=cwd, env=env,
        start_new_session=True, **popen)
    os.close(write_end)
    return proc, read_end


def hand_over(proc: subprocess.Popen[bytes], reply_fd: int, request: bytes,
              timeout: float = 300) -> tuple[list[bytes], bytes, bytes]:
    """Write the request, wait for the process; its answer lines, stdout and stderr."""
    out, err = proc.communicate(request, timeout=timeout)
    with os.fdopen(reply_fd, "rb") as reply:
        return reply.read().splitlines(), out or b"", err or b""


def test_without_a_spec_on_stdin_it_exits_at_once_and_leaves_nothing(tmp_path: Path) -> None:
    proc, reply = start_run_process(tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    answer, _, err = hand_over(proc, reply, b"", timeout=60)
    assert proc.returncode == 0, err
    assert answer == []
    assert list(tmp_path.iterdir()) == []
    assert processes_with(TAG, str(tmp_path)) == []  # its zygote neither


def test_a_refused_spec_is_one_answer_line_exit_2_and_nothing_left(tmp_path: Path) -> None:
    spec = {"graph": builtin_graph("bot"), "eval": {"split": "GoToLocal", "episode_count": -3}}
    proc, reply = start_run_process(tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    answer, _, err = hand_over(proc, reply, json.dumps(
        {"spec": spec, "outputs": str(tmp_path / "o")}).encode(), timeout=60)
    assert proc.returncode == 2, err
    assert len(answer) == 1
    assert json.loads(answer[0])["refused"].startswith("eval.episode_count: ")
    assert not (tmp_path / "o").exists()
    assert processes_with(TAG, str(tmp_path)) == []


def test_a_refused_spec_leaves_no_run_process_and_no_zygote(tmp_path: Path) -> None:
    cli = subprocess.Popen([sys.executable, "-m", "evaltui.cli", "eval", "bot", "--episodes",
                            "-3", "--outputs", str(tmp_path / "o")], cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    seen: list[psutil.Process] = []
    while cli.poll() is None and time.monotonic() < deadline:
        seen = seen or started_by(cli.pid)
        time.sleep(0.005)
    _, err = cli.communicate(timeout=60)
    assert cli.returncode == 2, err
    assert err.startswith("error: eval.episode_count: ") and "Traceback" not in err
    assert not (tmp_path / "o").exists()
    for proc in seen:  # the run process and its zygote, both ended before the CLI exited
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    assert started_by(cli.pid) == []


def test_the_run_process_is_the_run_its_record_and_run_log(tmp_path: Path) -> None:
    outputs = tmp_path / "o"
    out = subprocess.run([sys.executable, "-m", "evaltui.cli", "eval", "bot", "--episodes", "3",
                          "--workers", "2", "--json", "--outputs", str(outputs)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["state"] == "done" and result["summary"]["episodes_finished"] == 3
    run_dir = outputs / "eval_runs" / result["run_id"]
    record = read_json(run_dir / "scheduler.json")
    assert record["state"] == "starting" and record["exit_code"] == 0
    assert record["queued_at"] == record["admitted_at"]
    assert isinstance(record["pid"], int) and record["pid_create_time"] > 0
    assert (run_dir / "run.log").is_file()
    assert "Traceback" not in out.stderr


LOUD_POLICY = """import sys
print('loud import', file=sys.stderr)
print('loud import on stdout')
from evaltui.benchmarks.babyai.bot import BabyAIBotPolicy


class LoudPolicy(BabyAIBotPolicy):
    def __init__(self, **params):
        print('loud init', file=sys.stderr, flush=True)
        super().__init__(**params)
"""


def test_the_answer_travels_apart_from_output_which_then_goes_to_run_log(tmp_path: Path) -> None:
    # A policy module that prints on stdout and stderr when imported (by the spec check
    # and the zygote, before the run dir exists) and when a worker builds it (after).
    (tmp_path / "loud_policy.py").write_text(LOUD_POLICY)
    graph = builtin_graph("bot")
    graph["nodesets"]["policy"]["impl"] = "loud_policy:LoudPolicy"
    spec = {"graph": graph, "eval": {"split": "GoToLocal", "episode_count": 2},
            "active_workspace_dir": str(tmp_path)}
    proc, reply = start_run_process(tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    answer, out, err = hand_over(proc, reply, json.dumps(
        {"spec": spec, "outputs": str(tmp_path / "o")}).encode())
    assert proc.returncode == 0, err
    assert len(answer) == 1
    told = json.loads(answer[0])
    run_dir = Path(told["run_dir"])
    assert run_dir.parent == tmp_path / "o" / "eval_runs"
    assert told["graph_name"] == graph["name"] and told["split"] == "GoToLocal"
    assert told["episodes"] == 2 and told["step_budget"] == 64
    assert read_json(run_dir / "summary.json")["status"] == "done"
    assert (run_dir / "_DONE").exists()
    # Before the run dir existed, output went where the starter's went; then to run.log.
    assert b"loud init" not in err and b"loud init" not in out
    assert "loud init" in (run_dir / "run.log").read_text()
    assert b"loud import" in err


def test_eval_s_run_dir_is_the_one_submit_and_spawn_run_write(tmp_path: Path) -> None:
    """The run process checks and writes the run dir itself: the same files as
    ``prepare_run`` + ``spawn_run`` (every other start), the same results."""
    spec = {"graph": builtin_graph("bot"), "eval": {"split": "GoToLocal", "episode_count": 3}}
    (tmp_path / "job.json").write_text(json.dumps(spec))
    out = subprocess.run([sys.executable, "-m", "evaltui.cli", "eval", "job.json", "--json",
                          "--outputs", str(tmp_path / "a")], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    by_eval = tmp_path / "a" / "eval_runs" / json.loads(out.stdout)["run_id"]
    spec["active_workspace_dir"] = str(tmp_path.resolve())  # what eval's spec builder adds
    by_spawn = run_to_end(spec, tmp_path / "b")
    assert sorted(p.name for p in by_eval.iterdir()) == sorted(p.name for p in by_spawn.iterdir())
    for name in ("spec.json", "graph.json", "shared_urls.json"):
        assert read_json(by_eval / name) == read_json(by_spawn / name), name
    assert [comparable(r) for r in episode_rows(by_eval)] == \
        [comparable(r) for r in episode_rows(by_spawn)]


def test_the_cli_process_never_imports_the_spec_check_or_a_nodeset(tmp_path: Path) -> None:
    modules = tmp_path / "modules.json"
    code = ("import json, sys\nfrom evaltui.cli import main\n"
            f"code = main(['eval', 'bot', '--episodes', '2', '--json', '--outputs', "
            f"{str(tmp_path / 'o')!r}])\n"
            f"open({str(modules)!r}, 'w').write(json.dumps(sorted(sys.modules)))\n"
            "sys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["state"] == "done"
    loaded = json.loads(modules.read_text())
    assert [m for m in loaded if m.split(".")[0] in ("minigrid", "gymnasium", "pygame")
            or m.startswith(("evaltui.engine.graph.specchecks", "evaltui.benchmarks"))] == []
