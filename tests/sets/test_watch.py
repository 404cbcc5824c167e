"""``set watch``: checkpoints written by the real training script are evaluated as they
appear, each once; a restarted watch evaluates nothing again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from waiting import wait_until

from evaltui.cli import main
from evaltui.contract.setspec import SET_FILENAME, SETS_DIRNAME
from evaltui.procs.groups import signal_group
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root
from evaltui.sets.watch import CheckpointScanner

ROOT = Path(__file__).resolve().parents[2]


def test_a_checkpoint_is_complete_with_its_sidecar_or_once_it_stopped_growing(
        tmp_path: Path) -> None:
    now = [0.0]
    scanner = CheckpointScanner(tmp_path, "*.npz", settle_sec=2.0, clock=lambda: now[0])
    (tmp_path / "ckpt_20.npz").write_bytes(b"ab")
    (tmp_path / "ckpt_10.npz").write_bytes(b"a")
    (tmp_path / "ckpt_10.npz.done").touch()
    (tmp_path / "notes.npz").write_bytes(b"no step")
    assert [p.name for p in scanner.complete()] == ["ckpt_10.npz"]
    now[0] = 1.0
    with open(tmp_path / "ckpt_20.npz", "ab") as fh:
        fh.write(b"still growing")
    assert [p.name for p in scanner.complete()] == ["ckpt_10.npz"]
    now[0] = 2.5
    assert [p.name for p in scanner.complete()] == ["ckpt_10.npz"]  # 1.5 s unchanged
    now[0] = 3.5
    assert [p.name for p in scanner.complete()] == ["ckpt_10.npz", "ckpt_20.npz"]


def test_a_watch_queues_each_checkpoint_of_a_real_training_once(
        set_file: Callable[..., Path], outputs: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = set_file({"name": "curve", "base": {"graph": "model", "episodes": 3, "workers": 1},
                     "matrix": {"checkpoint": {"watch": "ckpts", "glob": "*.npz",
                                               "param": "policy.weights"}}})
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    watch = subprocess.Popen([sys.executable, "-m", "evaltui.cli", "set", "watch", str(path),
                              "--until", "3"], env=env, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    train = None
    try:
        set_json = outputs / SETS_DIRNAME / "curve" / SET_FILENAME
        wait_until(set_json.exists, timeout=60, what="the watch to start")
        train = subprocess.Popen([sys.executable, str(ROOT / "scripts/train_babyai_policy.py"),
                                  "--quick", "--checkpoint-dir", str(tmp_path / "ckpts"),
                                  "--every", "1", "--out", str(tmp_path / "final.npz")],
                                 env=env, start_new_session=True, stdout=subprocess.DEVNULL)
        wait_until(lambda: train.poll() is not None, timeout=120, what="the training")
        trained_at = datetime.now().timestamp()
        assert train.returncode == 0
        out, _ = watch.communicate(timeout=180)
    finally:
        for proc in (watch, train):
            if proc is not None and proc.poll() is None:
                signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
    assert watch.returncode == 0, out.decode()
    members = read_json(set_json)["members"]
    assert [m["axes"]["step"] for m in members] == [1, 2, 3]
    assert all(m["state"] == "done" and m["attempts"] == 1 for m in members)
    runs = sorted(runs_root(outputs).iterdir())
    assert sorted(m["run_id"] for m in members) == [r.name for r in runs]
    first = read_json(runs_root(outputs) / members[0]["run_id"] / "scheduler.json")
    assert datetime.fromisoformat(first["queued_at"]).timestamp() < trained_at  # while it ran
    assert b"step over steps" not in out and b"success over steps" in out

    before = {r.name: (r / "scheduler.json").stat().st_mtime_ns for r in runs}
    assert main(["set", "watch", str(path), "--until", "3"]) == 0
    after = {r.name: (r / "scheduler.json").stat().st_mtime_ns
             for r in runs_root(outputs).iterdir()}
    assert after == before  # the restarted watch evaluated nothing
    assert [m["key"] for m in read_json(set_json)["members"]] == [m["key"] for m in members]
    assert "success over steps" in capsys.readouterr().out


def test_set_watch_needs_a_watched_checkpoint_dir(
        set_file: Callable[..., Path], outputs: Path, capsys: pytest.CaptureFixture[str]
        ) -> None:
    path = set_file({"name": "plain", "base": {"graph": "bot"}})
    assert main(["set", "watch", str(path)]) == 2
    assert "matrix.checkpoint.watch: set watch needs a checkpoint axis" in \
        capsys.readouterr().err
    assert list(outputs.iterdir()) == []
    watched = set_file({"name": "w", "base": {"graph": "model"},
                        "matrix": {"checkpoint": {"watch": "ckpts", "glob": "*.npz"}}}, "w.yaml")
    assert main(["set", "run", str(watched)]) == 2
    assert "(set watch waits for them)" in capsys.readouterr().err
