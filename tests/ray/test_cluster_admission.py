"""Measured GPU admission across a Ray cluster (issue 12), on a two-node local cluster
with fake GPUs declared per node (node-a 1x24 GiB, node-b 1x24 GiB).

Schedulers run in their own processes (cluster_driver.py: a JobScheduler on a
ClusterProbe, runs that hold a few seconds); the cluster ledger's audit (every admit,
release and purge with the totals on that GPU right after it) is checked entry by entry.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raycluster import RayCluster, two_node_cluster

DRIVER = Path(__file__).resolve().parent / "cluster_driver.py"
GPU_MB = 24576


@pytest.fixture(scope="module")
def fake_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'evaltui[ray]')")
    root = tmp_path_factory.mktemp("nodes")
    envs = [{"EVALTUI_FAKE_GPUS": f"1x{GPU_MB}", "EVALTUI_NODE_NAME": name,
             "EVALTUI_STATE_DIR": str(root / name)} for name in ("node-a", "node-b")]
    with two_node_cluster(envs) as cluster:
        yield cluster


def since(audit: list[dict[str, Any]], start: float) -> list[dict[str, Any]]:
    """This test's records (the ledger actor lives as long as the module's cluster)."""
    return [a for a in audit if a["t"] >= start]


def drive(cluster: RayCluster, tmp_path: Path, name: str, jobs: list[dict[str, Any]]
          ) -> subprocess.Popen[str]:
    jobs_path = tmp_path / f"{name}.json"
    jobs_path.write_text(json.dumps(jobs))
    env = {**os.environ, **cluster.env(), "EVALTUI_OUTPUTS": str(tmp_path / name / "out"),
           "EVALTUI_STATE_DIR": str(tmp_path / name / "state")}
    return subprocess.Popen([sys.executable, str(DRIVER), cluster.address, str(jobs_path)],
                            env=env, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)


def result(proc: subprocess.Popen[str], timeout: float = 240) -> dict[str, Any]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])


def check_audit(audit: list[dict[str, Any]]) -> None:
    """At every change of the ledger: no GPU over-committed, an exclusive holder alone."""
    assert audit
    for record in audit:
        assert record["reserved_after"] <= GPU_MB, record
        if record["exclusive_after"]:
            assert record["holders_after"] == 1, record


def test_16gib_jobs_never_share_a_gpu_and_use_both_nodes(
        fake_cluster: RayCluster, tmp_path: Path) -> None:
    start = time.time()
    out = result(drive(fake_cluster, tmp_path, "one", [{"vram": 16384, "hold": 1.5}] * 4))
    runs = out["runs"].values()
    assert [r["state"] for r in runs] == ["done"] * 4
    assert {r["node"] for r in runs} == {"node-a", "node-b"}
    assert all(r["gpu"] == 0 and r["placed"]["EVALTUI_RAY_GPU"] == "0" for r in runs)
    assert all(r["placed"]["RAY_ADDRESS"] == fake_cluster.address for r in runs)
    assert len({r["placed"]["EVALTUI_RAY_NODE_ID"] for r in runs}) == 2
    check_audit(out["audit"])
    mine = since(out["audit"], start)
    assert max(a["holders_after"] for a in mine if a["op"] == "admit") == 1
    # Released when each run ended (not left to the lease).
    assert sorted(a["op"] for a in mine) == ["admit"] * 4 + ["release"] * 4


def test_an_exclusive_job_gets_a_gpu_to_itself(fake_cluster: RayCluster, tmp_path: Path
                                               ) -> None:
    jobs = [{"vram": 4096, "hold": 1.0}, {"vram": 1024, "exclusive": True, "hold": 1.5},
            {"vram": 4096, "hold": 1.0}, {"vram": 4096, "hold": 1.0}]
    out = result(drive(fake_cluster, tmp_path, "excl", jobs))
    assert [r["state"] for r in out["runs"].values()] == ["done"] * 4
    mine = [a for a in out["audit"] if a["run_id"] in out["runs"]]
    assert any(a["exclusive"] and a["op"] == "admit" for a in mine)
    check_audit(out["audit"])


def test_two_schedulers_never_over_commit_a_gpu(fake_cluster: RayCluster, tmp_path: Path
                                                ) -> None:
    jobs = [{"vram": 10240, "hold": 0.8}] * 5
    start = time.time()
    procs = [drive(fake_cluster, tmp_path, name, jobs) for name in ("s1", "s2")]
    outs = [result(p) for p in procs]
    for out in outs:
        assert [r["state"] for r in out["runs"].values()] == ["done"] * 5
    audit = since(max((o["audit"] for o in outs), key=len), start)
    assert len({a["scheduler"] for a in audit}) == 2
    assert sorted(a["op"] for a in audit) == ["admit"] * 10 + ["release"] * 10
    check_audit(audit)
    # Two 10 GiB runs fit on one 24 GiB GPU, three never do: both schedulers shared GPUs.
    assert max(a["holders_after"] for a in audit) == 2
