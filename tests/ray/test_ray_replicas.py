"""Replicas on Ray: a shared nodeset with ``replicas: per_gpu`` is one NodesetActor per
logical GPU of the cluster, each on its own GPU; rows equal the local run's; a replica
actor SIGKILLed mid-run leaves the run to the others, every episode once and ok.

A node with two (logical) GPUs is added to the session cluster for this module.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raycluster import OBJECT_STORE_BYTES, RayCluster, alive
from runhelpers import (
    builtin_graph,
    comparable,
    episode_rows,
    finished_count,
    run_to_end,
    running,
    wait_until,
)

from evaltui.rundir.jsonfiles import read_json

REPLICA_LINE = re.compile(r"Ray actor pid (\d+) on node \w+, asking .+ \(replica on GPU (\w+)\)")


@pytest.fixture(scope="module")
def two_gpu_node(ray_cluster: RayCluster) -> Iterator[Any]:
    cluster: Any = ray_cluster.cluster
    node = cluster.add_node(num_cpus=1, num_gpus=2, object_store_memory=OBJECT_STORE_BYTES,
                            temp_dir=tempfile.mkdtemp(prefix="gpu2-", dir=ray_cluster.temp_root))
    try:
        yield node
    finally:
        cluster.remove_node(node)


def spec(episodes: int, *, ray: str | None, replicas: Any = None,
         **policy: Any) -> dict[str, Any]:
    graph = builtin_graph("model", env__frame_stride=0,
                          **{f"policy__{k}": v for k, v in policy.items()})
    if replicas is not None:
        graph["nodesets"]["policy"]["replicas"] = replicas
    ev: dict[str, Any] = {"dataset": "babyai", "split": "GoToLocal", "episode_count": episodes,
                          "worker_count": 2, "max_episode_retries": 2}
    if ray:
        ev.update(executor="ray", ray_address=ray)
    return {"graph": graph, "eval": ev}


def same(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [comparable(r) | {"worker_count": 0} for r in rows]


def test_replicas_are_one_actor_per_gpu_and_rows_equal_the_local_run(
        ray_cluster: RayCluster, two_gpu_node: Any, tmp_path: Path) -> None:
    local = run_to_end(spec(6, ray=None), tmp_path / "local")
    run_dir = run_to_end(spec(6, ray=ray_cluster.address, replicas="per_gpu"),
                         tmp_path / "ray", timeout=120)
    log = (run_dir / "run.log").read_text()
    assert read_json(run_dir / "summary.json")["status"] == "done", log[-3000:]
    replicas = REPLICA_LINE.findall(log)
    assert sorted(gpu for _, gpu in replicas) == ["0", "1"], log[-3000:]
    assert same(episode_rows(run_dir)) == same(episode_rows(local))
    notes = read_json(run_dir / "summary.json")["replicas"]["policy"]
    node = f"node-{two_gpu_node.node_id[:6]}"
    assert sorted(n["gpu"] for n in notes) == [f"{node} GPU0", f"{node} GPU1"]
    assert {n["pid"] for n in notes} == {int(pid) for pid, _ in replicas}
    assert all(n["state"] == "up" for n in notes)
    assert sum(n["requests"] for n in notes) == sum(r["step_count"]
                                                    for r in episode_rows(run_dir))


def test_a_replica_actor_killed_mid_run_leaves_the_run_to_the_other(
        ray_cluster: RayCluster, two_gpu_node: Any, tmp_path: Path) -> None:
    episodes = 16
    with running(spec(episodes, ray=ray_cluster.address, replicas=2,
                      forward_latency_ms=30), tmp_path / "out") as (run_dir, proc):
        def replica_pids() -> list[int] | None:
            found = REPLICA_LINE.findall((run_dir / "run.log").read_text())
            return [int(pid) for pid, _ in found] if len(found) == 2 else None

        pids = wait_until(replica_pids, timeout=90, what="two replica actors")
        wait_until(lambda: finished_count(run_dir) >= 2, timeout=90, what="2 episodes")
        assert finished_count(run_dir) < episodes
        os.kill(pids[0], signal.SIGKILL)
        assert proc.wait(timeout=180) == 0, (run_dir / "run.log").read_text()[-3000:]
    assert not alive(pids[0])
    rows = episode_rows(run_dir)
    assert sorted(r["episode_index"] for r in rows) == list(range(episodes))
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "done"
    states = {n["pid"]: n["state"] for n in summary["replicas"]["policy"]}
    assert states == {pids[0]: "lost", pids[1]: "up"}


GPU_HOLDER = """
import sys, ray
ray.init(address=sys.argv[1], log_to_driver=False)

@ray.remote(num_gpus=1, num_cpus=0)
class Holder:
    def ping(self):
        return 1

holder = Holder.remote()
ray.get(holder.ping.remote())
print("ready", flush=True)
sys.stdin.read()  # until the test closes it: then the driver, and its actor, go
"""


def test_replicas_go_on_with_fewer_when_a_gpu_is_taken_and_min_replicas_started(
        ray_cluster: RayCluster, two_gpu_node: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_RAY_PLACE_TIMEOUT_SEC", "3")
    holder = subprocess.Popen([sys.executable, "-c", GPU_HOLDER, ray_cluster.address],
                              env={**os.environ, **ray_cluster.env()}, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        run_dir = run_to_end(spec(4, ray=ray_cluster.address, replicas="per_gpu"),
                             tmp_path / "out", timeout=120)
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(timeout=60)
        holder.stdout.close()
    log = (run_dir / "run.log").read_text()
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "done", log[-3000:]
    assert "no room for another replica of shared nodeset 'policy'" in log
    assert "going on with 1 of 2" in log
    assert [n["state"] for n in summary["replicas"]["policy"]] == ["up"]
