"""``evaltui set run`` with real runs: a 2x2x2 grid, idempotent reruns, a member killed
mid-way and resumed, a failing member retried and reported."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from waiting import wait_until

from evaltui.cli import main
from evaltui.contract.setspec import SET_FILENAME, SETS_DIRNAME
from evaltui.procs.groups import signal_group
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root

ROOT = Path(__file__).resolve().parents[2]


def set_json(outputs: Path, set_id: str) -> dict:
    return read_json(outputs / SETS_DIRNAME / set_id / SET_FILENAME)


def run_dirs(outputs: Path) -> list[Path]:
    root = runs_root(outputs)
    return sorted(root.iterdir()) if root.is_dir() else []


def test_a_grid_completes_its_table_is_the_members_summaries_and_a_rerun_starts_nothing(
        set_file: Callable[..., Path], outputs: Path, capsys: pytest.CaptureFixture[str]
        ) -> None:
    path = set_file({"name": "grid", "base": {"dataset": "babyai", "episodes": 10,
                                              "workers": 2},
                     "matrix": {"graph": ["bot", "noisy_bot"],
                                "split": ["GoToLocal", "GoToObjMaze"],
                                "policy.noise": [0.0, 0.2]},
                     "baseline": {"graph": "bot", "split": "GoToLocal", "policy.noise": 0.0}})
    assert main(["set", "run", str(path)]) == 0
    capsys.readouterr()
    record = set_json(outputs, "grid")
    assert set(record) >= {"set_id", "name", "file", "members"}
    assert record["file"]["matrix"]["policy.noise"] == [0.0, 0.2]
    members = record["members"]
    assert len(members) == 8 and all(m["state"] == "done" for m in members)
    assert all(set(m) >= {"key", "axes", "run_id", "state", "attempts"} for m in members)
    assert len(run_dirs(outputs)) == 8

    assert main(["set", "show", "grid", "--format", "json", "--baseline"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert table["set_id"] == "grid" and table["baseline"]["axes"]["graph"] == "bot"
    for row in table["members"]:
        summary = read_json(runs_root(outputs) / row["run_id"] / "summary.json")
        assert row["metrics"] == summary["metrics"]
        assert row["metrics_ci95"] == summary["metrics_ci95"]
        assert row["metrics_n"] == summary["metrics_n"]
        assert row["metrics_n"]["success"] == 10
    same_split = [r for r in table["members"] if r["axes"]["split"] == "GoToLocal"
                  and r["key"] != table["baseline"]["key"]]
    assert all("mcnemar_p_holm" in r["vs_baseline"] for r in same_split)

    # The same numbers in every format; the best mean per column marked.
    best_sr = max(r["metrics"]["success"] for r in table["members"])
    assert table["best"]["success"] == [r["key"] for r in table["members"]
                                        if r["metrics"]["success"] == best_sr]
    assert main(["set", "show", "grid", "--format", "md", "--metrics", "success"]) == 0
    md = capsys.readouterr().out
    first = table["members"][0]
    sr, (lo, hi) = first["metrics"]["success"], first["metrics_ci95"]["success"]
    assert f"**{sr:.3f} [{lo:.3f}, {hi:.3f}]**" in md  # bot at noise 0 solves all ten
    assert main(["set", "show", "grid", "--format", "csv", "--pivot", "split"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].startswith("graph,split,policy.noise,state,run_id,success_mean,")
    assert len(rows) == 9
    assert main(["set", "show", "grid", "--format", "latex", "--pivot", "split",
                 "--metrics", "success"]) == 0
    latex = capsys.readouterr().out
    assert "\\toprule" in latex and "success (split=GoToObjMaze)" in latex
    assert latex.count("\\textbf{") >= 2
    assert main(["set", "show", "grid", "--pivot", "colour"]) == 2
    assert "no axis 'colour'" in capsys.readouterr().err

    before = {d.name: (d / "scheduler.json").stat().st_mtime_ns for d in run_dirs(outputs)}
    assert main(["set", "run", str(path)]) == 0
    after = {d.name: (d / "scheduler.json").stat().st_mtime_ns for d in run_dirs(outputs)}
    assert after == before  # no run started, none resumed
    assert [m["attempts"] for m in set_json(outputs, "grid")["members"]] == [1] * 8


def test_a_member_killed_mid_way_is_resumed_with_only_its_missing_episodes(
        set_file: Callable[..., Path], outputs: Path) -> None:
    path = set_file({"name": "slow", "base": {"graph": "model", "episodes": 10, "workers": 2,
                                              "set": {"policy.forward_latency_ms": 15}}})
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "evaltui.cli", "set", "run", str(path),
                             "--retries", "1", "--retry-backoff", "0.1"],
                            env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        def some_done() -> Path | None:
            for run_dir in run_dirs(outputs):
                ok = [p for p in run_dir.glob("episodes/ep*/episode.json")
                      if read_json(p).get("status") == "ok"]
                if len(ok) >= 3:
                    return run_dir
            return None

        run_dir = wait_until(some_done, timeout=90, what="3 episodes of the member")
        record = read_json(run_dir / "scheduler.json")
        os.kill(record["pid"], signal.SIGKILL)
        before = {p.parent.name: read_json(p) for p in run_dir.glob("episodes/ep*/episode.json")}
        kept = {k for k, row in before.items() if row["status"] == "ok"}
        assert 3 <= len(kept) < 10
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, out.decode()
    assert b"aborted" in out
    assert run_dirs(outputs) == [run_dir]  # resumed in place, not run again
    after = {p.parent.name: read_json(p) for p in run_dir.glob("episodes/ep*/episode.json")}
    assert len(after) == 10 and all(r["status"] == "ok" for r in after.values())
    for name in kept:  # the episodes done before the kill were not run again
        assert after[name]["finished_at"] == before[name]["finished_at"]
        assert after[name]["attempts"] == 1
    assert read_json(run_dir / "scheduler.json")["resume_count"] == 1
    member = set_json(outputs, "slow")["members"][0]
    assert member["state"] == "done" and member["attempts"] == 2


def test_a_failing_member_is_retried_then_reported(
        set_file: Callable[..., Path], outputs: Path, capsys: pytest.CaptureFixture[str],
        unbounded_bot_graph: dict) -> None:
    path = set_file({"name": "fails", "base": {**unbounded_bot_graph, "episodes": 2,
                                               "workers": 1},
                     "matrix": {"policy.noise": [0.0, 1.5]}})
    code = main(["set", "run", str(path), "--retries", "1", "--retry-backoff", "0.05"])
    err = capsys.readouterr().err
    assert code == 1
    ok, bad = set_json(outputs, "fails")["members"]
    assert ok["state"] == "done" and ok["attempts"] == 1
    assert bad["state"] == "failed" and bad["attempts"] == 2
    assert "noise must be in [0, 1]" in bad["error"]
    assert "policy.noise=1.5 after 2 attempt(s)" in err
    rec = read_json(runs_root(outputs) / bad["run_id"] / "scheduler.json")
    assert rec["resume_count"] == 1  # the retry resumed the same run dir


def test_max_error_rate_then_detach_cancel_resume_ls_and_a_deleted_run(
        set_file: Callable[..., Path], outputs: Path, capsys: pytest.CaptureFixture[str],
        unbounded_bot_graph: dict) -> None:
    path = set_file({"name": "mixed", "base": {**unbounded_bot_graph, "episodes": 2,
                                               "workers": 1},
                     "matrix": {"policy.noise": [1.5, 2.0, 0.0, 0.1]}})
    assert main(["set", "run", str(path), "--max-error-rate", "0.2"]) == 1
    err = capsys.readouterr().err
    states = [m["state"] for m in set_json(outputs, "mixed")["members"]]
    # All four are submitted at once; none is known to have failed yet. What stops the
    # submitting is the failure share: asked again, the failed members are not retried.
    assert states.count("failed") == 2 and states.count("done") == 2, states
    assert "policy.noise=1.5 after 1 attempt(s)" in err
    assert main(["set", "run", str(path), "--max-error-rate", "0.2"]) == 1
    assert [m["attempts"] for m in set_json(outputs, "mixed")["members"]] == [1, 1, 1, 1]
    capsys.readouterr()

    quick = set_file({"name": "later", "base": {"graph": "model", "episodes": 4, "workers": 1},
                      "matrix": {"policy.forward_latency_ms": [10, 11]}}, "later.yaml")
    assert main(["set", "run", str(quick), "--detach"]) == 0
    assert [m["state"] for m in set_json(outputs, "later")["members"]] == ["queued"] * 2
    assert main(["set", "cancel", "later"]) == 0
    assert "cancel asked of 2 member run(s)" in capsys.readouterr().out
    assert main(["set", "resume", "later"]) == 0
    members = set_json(outputs, "later")["members"]
    assert [m["state"] for m in members] == ["done", "done"]
    assert len(run_dirs(outputs)) == 6  # resumed in their run dirs, none run twice
    capsys.readouterr()
    # A member whose run dir was deleted is run again.
    shutil.rmtree(runs_root(outputs) / members[1]["run_id"])
    assert main(["set", "resume", "later"]) == 0
    assert "any more: submitted again" in capsys.readouterr().err
    again = set_json(outputs, "later")["members"]
    assert again[1]["state"] == "done" and again[1]["attempts"] == 3
    assert (runs_root(outputs) / again[1]["run_id"] / "summary.json").is_file()
    assert again[0] == members[0]
    assert main(["set", "ls", "--json"]) == 0
    listed = {s["set_id"]: s for s in json.loads(capsys.readouterr().out)}
    assert listed["later"]["states"] == {"done": 2} and listed["mixed"]["members"] == 4

