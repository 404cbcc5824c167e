"""Runs with replicas through a cluster scheduler (``evaltui serve --ray``), issue 22 item 4:
admitted over node GPUs by the cluster admission, every node GPU reserved in the cluster
ledger, one replica NodesetActor pinned to each; a second such run waits naming the node
GPUs while the first holds them, then runs.

Its own two-node cluster: node-a with 2 fake GPUs of 24 GiB, node-b with 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raycluster import RayCluster, two_node_cluster
from runhelpers import builtin_graph, episode_rows, wait_until
from test_cluster_admission import ledger_now, serve, stop

from evaltui.rundir.jsonfiles import read_json

GPU_MB = 24576
LABELS = ["node-a GPU0", "node-a GPU1", "node-b GPU0"]  # best fit: equal, by label


@pytest.fixture(scope="module")
def three_gpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'evaltui[ray]')")
    root = tmp_path_factory.mktemp("nodes")
    envs = [{"EVALTUI_FAKE_GPUS": f"{n}x{GPU_MB}", "EVALTUI_NODE_NAME": name,
             "EVALTUI_STATE_DIR": str(root / name)} for name, n in (("node-a", 2), ("node-b", 1))]
    with two_node_cluster(envs) as cluster:
        yield cluster


def replica_spec(address: str, episodes: int, min_replicas: int, latency_ms: float
                 ) -> dict[str, Any]:
    graph = builtin_graph("model", env__frame_stride=0)
    graph["nodesets"]["policy"]["params"]["forward_latency_ms"] = latency_ms
    graph["nodesets"]["policy"].update(replicas="per_gpu", min_replicas=min_replicas)
    return {"graph": graph, "scheduling": {"marginal_vram_mb": 16384},
            "eval": {"dataset": "babyai", "split": "GoToLocal", "episode_count": episodes,
                     "worker_count": 2, "executor": "ray", "ray_address": address}}


def test_per_gpu_gets_a_replica_actor_on_each_node_gpu_and_a_second_run_waits_naming_them(
        three_gpus: RayCluster, tmp_path: Path) -> None:
    from evaltui.api.client import ApiClient

    server = None
    try:
        server, url = serve(three_gpus, tmp_path)
        with ApiClient(url) as client:
            first = Path(client.get_run(client.submit(
                replica_spec(three_gpus.address, 6, 1, 40)).run_id).run_dir)
            second = Path(client.get_run(client.submit(
                replica_spec(three_gpus.address, 2, 2, 0)).run_id).run_dir)

        def waiting_reason() -> str | None:
            reason = read_json(second / "scheduler.json").get("waiting_reason")
            return reason if reason and reason.startswith("needs") else None
        reason = wait_until(waiting_reason, timeout=60, what="the second run to say why it waits")
        need, gpus = reason.split("; ", 1)
        assert need == "needs 16.0 GiB on >= 2 GPUs", reason
        assert sorted(gpus.split(", ")) == [f"{label} 8.0 free" for label in LABELS], reason
        held = [e for e in ledger_now(three_gpus)["entries"]
                if e["run_id"].split("#")[0] == first.name]
        assert sorted((e["node"], e["index"], e["vram_mb"]) for e in held) == \
            [("node-a", 0, 16384), ("node-a", 1, 16384), ("node-b", 0, 16384)]

        def ended(run_dir: Path) -> bool:
            return (run_dir / "summary.json").exists() and \
                read_json(run_dir / "summary.json").get("status") in ("done", "failed")
        for run_dir, episodes in ((first, 6), (second, 2)):
            wait_until(lambda d=run_dir: ended(d), timeout=120, what=f"{run_dir.name} to end")
            log = (run_dir / "run.log").read_text()
            summary = read_json(run_dir / "summary.json")
            assert summary["status"] == "done", log[-3000:]
            record = read_json(run_dir / "scheduler.json")
            assert record["gpus"] == LABELS and record["node"] == "node-a", record
            notes = summary["replicas"]["policy"]
            assert [n["gpu"] for n in notes] == record["gpus"], notes
            assert all(n["state"] == "up" for n in notes)
            rows = episode_rows(run_dir)
            assert [r["status"] for r in rows] == ["ok"] * episodes
            assert sum(n["requests"] for n in notes) == sum(r["step_count"] for r in rows)
        audit = [a for a in ledger_now(three_gpus)["audit"]
                 if a["run_id"].split("#")[0] in (first.name, second.name)]
        assert all(a["reserved_after"] <= GPU_MB for a in audit)
        assert sorted(a["op"] for a in audit) == ["admit"] * 6 + ["release"] * 6
    finally:
        stop(server)
