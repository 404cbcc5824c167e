"""A worker the kernel's OOM killer ends is said to have died for memory, not "signal 9".

The run process is started in a memory cgroup of its own with a small limit (root only,
cgroup v1 or v2; skipped with one line elsewhere), and one episode's policy fills 4 GiB.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixture_nodesets import corridor_graph
from runhelpers import ENGINE_TESTS, episode_rows, write_corridor_dataset

from evaltui.engine.processes.oomkills import CGROUP_ROOT, OOM_KILLED
from tests.runprep import prepare_run

LIMIT_MB = 1024


@pytest.fixture
def memory_cgroup() -> Iterator[Path]:
    """A fresh memory cgroup limited to LIMIT_MB (no swap); removed after the test."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a memory cgroup (OOM test)")
    if (CGROUP_ROOT / "cgroup.controllers").exists():  # v2
        path, limits = CGROUP_ROOT / f"evaltui-oom-{os.getpid()}", {
            "memory.max": str(LIMIT_MB << 20), "memory.swap.max": "0"}
    else:
        path, limits = CGROUP_ROOT / "memory" / f"evaltui-oom-{os.getpid()}", {
            "memory.limit_in_bytes": str(LIMIT_MB << 20),
            "memory.memsw.limit_in_bytes": str(LIMIT_MB << 20)}
    try:
        path.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a memory cgroup here: {exc}")
    try:
        for name, value in limits.items():
            if (path / name).exists():
                (path / name).write_text(value)
        yield path
    finally:
        for pid in (path / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        path.rmdir()


def test_an_oom_killed_worker_is_said_to_be_killed_for_memory(tmp_path: Path,
                                                              memory_cgroup: Path) -> None:
    graph = corridor_graph()
    graph["nodesets"]["policy"] = {"impl": "fixture_nodesets:HungryPolicy",
                                   "parallelism": "inline", "params": {"hungry_on_goal": 3}}
    dataset = write_corridor_dataset(tmp_path / "corridor.jsonl", [2, 3, 2])
    spec = {"graph": graph, "active_workspace_dir": str(ENGINE_TESTS),
            "eval": {"dataset": str(dataset)}}
    run_dir, _ = prepare_run(spec, tmp_path / "out")
    procs = memory_cgroup / "cgroup.procs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "evaltui.engine.main", str(run_dir)], start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=lambda: procs.write_text(str(os.getpid())))  # in the cgroup before exec
    try:
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    rows = {r["episode_index"]: r for r in episode_rows(run_dir)}
    assert rows[1]["status"] == "error"
    assert f"worker died (signal 9, {OOM_KILLED})" in rows[1]["error"], rows[1]["error"]
    assert rows[0]["status"] == rows[2]["status"] == "ok"
