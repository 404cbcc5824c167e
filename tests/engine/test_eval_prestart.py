"""``evaltui eval`` starts its run process before it validates the spec
(``python -m evaltui.engine.main --run-dir-from-stdin``), then hands it the run dir."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
from runhelpers import builtin_graph

from evaltui.rundir import read_json

PRESTART_FLAG = "--run-dir-from-stdin"


def early_processes_of(parent_pid: int) -> list[psutil.Process]:
    """Live run processes started with PRESTART_FLAG by the process ``parent_pid``."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if PRESTART_FLAG not in (proc.info["cmdline"] or []):
                continue
            if proc.environ().get("EVALTUI_PARENT_PID") == str(parent_pid) and \
                    proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_without_a_run_dir_on_stdin_it_exits_at_once_and_writes_nothing(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "evaltui.engine.main", PRESTART_FLAG],
                          input=b"", capture_output=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_refused_spec_leaves_no_early_run_process(tmp_path: Path) -> None:
    cli = subprocess.Popen([sys.executable, "-m", "evaltui.cli", "eval", "bot", "--episodes",
                            "-3", "--outputs", str(tmp_path / "o")], cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    seen = []
    while cli.poll() is None and time.monotonic() < deadline:
        seen = seen or early_processes_of(cli.pid)
        time.sleep(0.005)
    _, err = cli.communicate(timeout=60)
    assert cli.returncode == 2, err
    assert "eval.episode_count" in err
    assert not (tmp_path / "o").exists()
    for proc in seen:  # it was killed and reaped by the CLI, not left to finish importing
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    assert early_processes_of(cli.pid) == []


def test_the_early_process_is_the_run_its_log_is_run_log(tmp_path: Path) -> None:
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
    assert isinstance(record["pid"], int) and record["pid_create_time"] > 0
    assert (run_dir / "run.log").is_file()
    assert "Traceback" not in out.stderr


def test_a_run_dir_on_stdin_runs_it_with_output_to_run_log(tmp_path: Path) -> None:
    from evaltui.launch import prepare_run

    # A policy module that prints when imported: the spec check imports it in the run
    # process after the hand-over, and every worker (forked from the zygote) has it.
    (tmp_path / "loud_policy.py").write_text(
        "import sys\nprint('loud import', file=sys.stderr)\n"
        "from evaltui.benchmarks.babyai.bot import BabyAIBotPolicy as LoudPolicy\n")
    graph = builtin_graph("bot")
    graph["nodesets"]["policy"]["impl"] = "loud_policy:LoudPolicy"
    spec = {"graph": graph, "eval": {"split": "GoToLocal", "episode_count": 2},
            "active_workspace_dir": str(tmp_path)}
    sys.path.insert(0, str(tmp_path))  # prepare_run validates here, as eval does
    try:
        run_dir, _ = prepare_run(spec, tmp_path / "o")
    finally:
        sys.path.remove(str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "evaltui.engine.main", PRESTART_FLAG],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path)
    out, err = proc.communicate(f"{run_dir}\n".encode(), timeout=300)
    assert proc.returncode == 0, err
    assert out == b"" and err == b""  # from the run dir on, everything goes to run.log
    assert read_json(run_dir / "summary.json")["status"] == "done"
    assert (run_dir / "_DONE").exists()
    assert "loud import" in (run_dir / "run.log").read_text()
