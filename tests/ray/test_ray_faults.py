"""Ray executor faults through the real run subprocess: a SIGKILLed actor, a hung step,
cancel, and ray missing (exit 2 with the install hint)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_nodesets import corridor_graph
from raycluster import RayCluster, actor_pids, alive
from runhelpers import (
    ENGINE_TESTS,
    episode_rows,
    run_to_end,
    running,
    wait_until,
    write_corridor_dataset,
)

from evaltui.rundir.jsonfiles import read_json


def started(run_dir: Path) -> bool:
    """Some episode of the run has logged a step."""
    return any(p.stat().st_size > 0 for p in run_dir.glob("episodes/ep*/log.jsonl"))


@pytest.fixture(autouse=True)
def importable_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ENGINE_TESTS))


def corridor_spec(tmp_path: Path, goals: list[int], address: str, *, env: dict | None = None,
                  policy: dict | None = None, **eval_fields: object) -> dict:
    dataset = write_corridor_dataset(tmp_path / "corridor.jsonl", goals)
    graph = corridor_graph(**(policy or {}))
    graph["nodesets"]["env"]["params"] = env or {}
    return {"graph": graph, "active_workspace_dir": str(ENGINE_TESTS),
            "eval": {"dataset": str(dataset), "executor": "ray", "ray_address": address,
                     **eval_fields}}


def test_sigkilled_actor_fails_its_episode_then_the_retry_is_ok(
        ray_cluster: RayCluster, tmp_path: Path) -> None:
    spec = corridor_spec(tmp_path, [12, 12, 12, 12], ray_cluster.address,
                         env={"step_sleep_sec": 0.05}, worker_count=2, max_episode_retries=1)
    with running(spec, tmp_path / "out") as (run_dir, proc):
        wait_until(lambda: len(actor_pids(run_dir)) == 2 and started(run_dir), timeout=30,
                   what="both actors up and an episode running")
        victim = actor_pids(run_dir)[0]
        os.kill(victim, signal.SIGKILL)
        errors: list[dict] = []

        def an_error_row() -> bool:
            for path in run_dir.glob("episodes/ep*/episode.json"):
                try:
                    row = read_json(path)
                except (OSError, ValueError):
                    continue
                if row["status"] == "error":
                    errors.append(row)
                    return True
            return False

        wait_until(an_error_row, timeout=20, what="the killed episode's error row")
        assert proc.wait(timeout=60) == 0
    error = errors[0]["error"]
    assert error.startswith("worker died (node ") and f"pid {victim}," in error, error
    rows = {r["episode_index"]: r for r in episode_rows(run_dir)}
    assert [r["status"] for r in rows.values()] == ["ok"] * 4
    assert rows[errors[0]["episode_index"]]["attempts"] == 2
    assert read_json(run_dir / "summary.json")["status"] == "done"


def test_a_hung_step_is_a_timeout(ray_cluster: RayCluster, tmp_path: Path) -> None:
    spec = corridor_spec(tmp_path, [2, 7, 3], ray_cluster.address, per_step_budget_sec=0.3,
                         policy={"hang_on_goal": 7})
    run_dir = run_to_end(spec, tmp_path / "out", timeout=60)
    rows = {r["episode_index"]: r for r in episode_rows(run_dir)}
    assert rows[1]["status"] == "timeout"
    assert "a node is blocking" in rows[1]["error"]
    assert rows[0]["status"] == rows[2]["status"] == "ok"
    assert read_json(run_dir / "summary.json")["status"] == "done"


def test_cancel_ends_the_run_cancelled_and_its_actors(ray_cluster: RayCluster,
                                                       tmp_path: Path) -> None:
    spec = corridor_spec(tmp_path, [30] * 6, ray_cluster.address,
                         env={"step_sleep_sec": 0.05}, worker_count=2)
    with running(spec, tmp_path / "out") as (run_dir, proc):
        wait_until(lambda: len(actor_pids(run_dir)) == 2 and started(run_dir), timeout=30,
                   what="both actors up and an episode running")
        pids = list(actor_pids(run_dir).values())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 3
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "cancelled"
    assert "cancelled" in summary["counts_by_status"]
    wait_until(lambda: not any(alive(pid) for pid in pids), timeout=10,
               what="the run's actors to end")


BLOCK_RAY = """
import sys
class BlockRay:
    def find_spec(self, name, path=None, target=None):
        if name == "ray" or name.startswith("ray."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, BlockRay())
from evaltui.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_ray_eval_exits_2_with_the_install_hint(tmp_path: Path) -> None:
    """ray hidden from real interpreters (an import blocker), not mocked: from every one
    of the command's, as eval's run process checks the spec."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCK_RAY.split("from evaltui.cli")[0])
    args = [sys.executable, "-m", "evaltui.cli", "eval", "bot", "--episodes", "1",
            "--executor", "ray", "--ray-address", "127.0.0.1:1"]
    path = os.pathsep.join(filter(None, [str(blocker), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "COLUMNS": "200", "PYTHONPATH": path})
    assert proc.returncode == 2, proc.stderr
    assert "install evaltui[ray]" in proc.stderr
    assert not list(tmp_path.rglob("spec.json"))  # refused before any run dir was made


def test_without_ray_submit_exits_2_before_asking_the_backend(tmp_path: Path) -> None:
    """A listening socket stands for the backend: nothing may connect to it."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as backend:
        url = f"http://127.0.0.1:{backend.getsockname()[1]}"
        args = [sys.executable, "-c", BLOCK_RAY, "submit", "bot", "--episodes", "1",
                "--executor", "ray", "--ray-address", "127.0.0.1:1", "--url", url]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=60,
                              cwd=tmp_path, env={**os.environ, "COLUMNS": "200"})
        backend.settimeout(0.2)
        with pytest.raises(TimeoutError):
            backend.accept()[0].close()
    assert proc.returncode == 2, proc.stderr
    assert "install evaltui[ray]" in proc.stderr


def test_a_ray_run_starts_no_local_worker_template(ray_cluster: RayCluster,
                                                   tmp_path: Path) -> None:
    """The local pool's zygote would only compete with the run's imports and the actors'
    start for this machine's CPUs: a Ray run has none among its processes."""
    import psutil

    spec = corridor_spec(tmp_path, [30], ray_cluster.address, env={"step_sleep_sec": 0.05})
    with running(spec, tmp_path / "out") as (run_dir, proc):
        wait_until(lambda: started(run_dir), timeout=60, what="the episode running")
        children = psutil.Process(proc.pid).children(recursive=True)
        lines = [" ".join(c.cmdline()) for c in children if c.is_running()]
        assert not [line for line in lines if "zygote" in line], lines
        assert proc.wait(timeout=60) == 0
