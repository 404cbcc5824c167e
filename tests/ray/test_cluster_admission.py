"""Measured GPU admission across a Ray cluster, on a two-node local cluster
with fake GPUs declared per node (node-a 1x24 GiB, node-b 1x24 GiB), and a third node
(node-c) added and removed mid-run.

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


LEDGER_AUDIT = """
import json, sys, ray
ray.init(address=sys.argv[1], log_to_driver=False)
ledger = ray.get_actor("evaltui-ledger", namespace="evaltui")
print(json.dumps({"audit": ray.get(ledger.audit.remote()),
                  "entries": ray.get(ledger.entries.remote())}))
"""


def ledger_now(cluster: RayCluster) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", LEDGER_AUDIT, cluster.address],
                         env={**os.environ, **cluster.env()}, capture_output=True,
                         text=True, timeout=60, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def serve(cluster: RayCluster, tmp_path: Path) -> tuple[subprocess.Popen[str], str]:
    """``evaltui serve --ray ADDRESS`` on an ephemeral loopback port."""
    import re

    with open(tmp_path / "serve.err", "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "evaltui.cli", "serve", "--port", "0",
                                 "--ray", cluster.address],
                                env={**os.environ, **cluster.env()}, stdout=subprocess.PIPE,
                                stderr=err, text=True, start_new_session=True)
    line = proc.stdout.readline() if proc.stdout else ""
    found = re.search(r"listening on (http://\S+)", line)
    if not found:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError((line, (tmp_path / "serve.err").read_text()))
    return proc, found.group(1)


def stop(server: subprocess.Popen[str] | None) -> None:
    """End a ``serve`` by its process group (SIGTERM, then SIGKILL after 20 s)."""
    if server is None:
        return
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    if server.stdout is not None:
        server.stdout.close()


@pytest.mark.parametrize("others", ["free", "full"])
def test_a_run_whose_node_leaves_is_moved_and_completes_elsewhere(
        fake_cluster: RayCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        others: str) -> None:
    """Node-c (1x20 GiB: the best fit for 16 GiB, so the run lands there) is removed
    mid-run: the scheduler moves the run's reservation to node-a or node-b, the run
    follows (its lost episodes retried there, without any max_episode_retries), ends
    ``done``, and the ledger holds nothing on node-c. ``full``: both other GPUs are
    taken by 16 GiB runs when node-c goes, so the run's node-c reservation is released,
    it says why it waits, and it moves when one of them ends."""
    from raycluster import OBJECT_STORE_BYTES, _env
    from runhelpers import episode_rows, wait_until
    from test_ray_faults import corridor_spec

    from evaltui.api.client import ApiClient
    from evaltui.rundir.jsonfiles import read_json

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "engine"))
    cluster: Any = fake_cluster.cluster
    node_dir = fake_cluster.temp_root / "node-c"
    with _env({"EVALTUI_FAKE_GPUS": "1x20480", "EVALTUI_NODE_NAME": "node-c",
               "EVALTUI_STATE_DIR": str(node_dir / "state")}):
        node_c = cluster.add_node(num_cpus=2, object_store_memory=OBJECT_STORE_BYTES,
                                  temp_dir=str(node_dir))
    server: subprocess.Popen[str] | None = None
    try:
        cluster.wait_for_nodes(timeout=60)
        server, url = serve(fake_cluster, tmp_path)
        spec = corridor_spec(tmp_path, [25] * 8, fake_cluster.address,
                             env={"step_sleep_sec": 0.06}, worker_count=2)
        spec["scheduling"] = {"marginal_vram_mb": 16384}
        with ApiClient(url) as client:
            run_id = client.submit(spec).run_id
            run_dir = Path(client.get_run(run_id).run_dir)

        def on_node_c_running_episodes() -> bool:
            record = read_json(run_dir / "scheduler.json")
            logs = [p for p in run_dir.glob("episodes/ep*/log.jsonl") if p.stat().st_size]
            return record.get("node") == "node-c" and len(logs) >= 2
        try:
            wait_until(on_node_c_running_episodes, timeout=90,
                       what="the run placed on node-c with episodes running")
        except AssertionError:
            log = run_dir / "run.log"
            raise AssertionError((read_json(run_dir / "scheduler.json"),
                                  log.read_text()[-3000:] if log.exists() else "no run.log",
                                  (tmp_path / "serve.err").read_text()[-3000:])) from None
        if others == "full":
            blocker = corridor_spec(tmp_path, [60], fake_cluster.address, executor="local",
                                    env={"step_sleep_sec": 0.1})
            blocker["scheduling"] = {"marginal_vram_mb": 16384}
            with ApiClient(url) as client:
                blockers = [Path(client.get_run(client.submit(blocker).run_id).run_dir)
                            for _ in range(2)]
            wait_until(lambda: {read_json(b / "scheduler.json").get("node")
                                for b in blockers} == {"node-a", "node-b"}, timeout=60,
                       what="a 16 GiB run on node-a and one on node-b")
        lost_at = time.time()
        cluster.remove_node(node_c)  # graceful: the raylet stops, its workers die
        if others == "full":
            reason = wait_until(lambda: read_json(run_dir / "scheduler.json")
                                .get("waiting_reason"), timeout=30,
                                what="the run to say why it waits")
            assert reason.startswith("its node node-c left the Ray cluster; waiting for "
                                     "another GPU: needs 16.0 GiB; node-"), reason
            entries = ledger_now(fake_cluster)["entries"]
            assert not [e for e in entries if e["run_id"] == run_id], entries

        def ended() -> bool:
            return (run_dir / "summary.json").exists() and \
                read_json(run_dir / "summary.json")["status"] in ("done", "failed")
        wait_until(ended, timeout=150, what="the run to end")
        log = (run_dir / "run.log").read_text()
        summary = read_json(run_dir / "summary.json")
        assert summary["status"] == "done", log[-3000:]
        rows = episode_rows(run_dir)
        assert [r["status"] for r in rows] == ["ok"] * 8, [(r["attempts"], r.get("error"))
                                                           for r in rows]
        retried = [r for r in rows if r["attempts"] >= 2]  # the episodes lost with node-c
        assert retried
        first = min(float(json.loads((run_dir / "episodes" / f"ep{r['episode_index']:04d}" /
                                      "log.jsonl").read_text().splitlines()[0])["t"])
                    for r in retried)
        print(f"node-c removed -> first retried episode's first record: {first - lost_at:.2f} s")
        assert "the run moved from node" in log, log[-3000:]
        record = read_json(run_dir / "scheduler.json")
        assert record["node"] in ("node-a", "node-b") and record["moved_from"] == ["node-c"]

        def released() -> bool:
            return not [e for e in ledger_now(fake_cluster)["entries"] if e["run_id"] == run_id]
        wait_until(released, timeout=30, what="the run's reservation released at its end")
        ops = [(a["op"], a["node"]) for a in ledger_now(fake_cluster)["audit"]
               if a["run_id"] == run_id]
        # "restore" instead of "admit" only if the ledger actor itself was restarted.
        assert ops[0][0] in ("admit", "restore") and ops[0][1] == "node-c", ops
        assert ops[1] == ("release", "node-c"), ops
        assert ops[2][0] == "admit" and ops[2][1] in ("node-a", "node-b"), ops
        assert len(ops) == 4, ops
        assert ops[-1][0] == "release" and ops[-1][1] == ops[2][1], ops
    finally:
        stop(server)
        if node_c in cluster.worker_nodes:
            cluster.remove_node(node_c, allow_graceful=False)
        cluster.wait_for_nodes(timeout=40)


def test_a_restarted_scheduler_holds_its_adopted_runs_gpus_again(
        fake_cluster: RayCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """serve #1 admits a run on a node's GPU and is SIGKILLed; serve #2 adopts the run and
    holds its reservation in the cluster ledger again before #1's lease runs out, so the
    GPU is never free to other schedulers while the run still runs on it."""
    from runhelpers import wait_until
    from test_ray_faults import corridor_spec

    from evaltui.api.client import ApiClient
    from evaltui.rundir.jsonfiles import read_json

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "engine"))
    first, url = serve(fake_cluster, tmp_path)
    second: subprocess.Popen[str] | None = None
    try:
        spec = corridor_spec(tmp_path, [40] * 6, fake_cluster.address,
                             env={"step_sleep_sec": 0.1}, worker_count=1)
        spec["scheduling"] = {"marginal_vram_mb": 16384}
        with ApiClient(url) as client:
            run_id = client.submit(spec).run_id
            run_dir = Path(client.get_run(run_id).run_dir)
        wait_until(lambda: read_json(run_dir / "scheduler.json").get("state") == "running",
                   timeout=60, what="the run running")
        node = read_json(run_dir / "scheduler.json")["node"]
        os.kill(first.pid, signal.SIGKILL)  # the API process only: the run lives on
        first.wait()
        second, _ = serve(fake_cluster, tmp_path)

        def restored() -> list[dict[str, Any]]:
            audit = [a for a in ledger_now(fake_cluster)["audit"] if a["run_id"] == run_id]
            return audit if any(a["op"] == "restore" for a in audit) else []
        audit = wait_until(restored, timeout=40, what="serve #2 to hold the run's GPU")
        assert [a["op"] for a in audit] == ["admit", "handover", "restore"], audit
        assert audit[0]["scheduler"] == audit[1]["scheduler"] != audit[2]["scheduler"]
        assert audit[2]["node"] == node
        assert (audit[2]["reserved_after"], audit[2]["holders_after"]) == (16384, 1)
        time.sleep(12)  # serve #1's lease (10 s) runs out: nothing of the run is purged
        audit = [a for a in ledger_now(fake_cluster)["audit"] if a["run_id"] == run_id]
        assert [a["op"] for a in audit] == ["admit", "handover", "restore"], audit
        held = [e for e in ledger_now(fake_cluster)["entries"] if e["run_id"] == run_id]
        assert [e["scheduler"] for e in held] == [audit[2]["scheduler"]], held
        check_audit(audit)
        wait_until(lambda: (run_dir / "summary.json").exists() and read_json(
            run_dir / "summary.json")["status"] == "done", timeout=90, what="the run done")
    finally:
        stop(first)
        stop(second)


def test_a_cluster_run_s_measured_peak_calibrates_the_next_one(
        fake_cluster: RayCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's actor allocates 3,000 MiB of node-a's or node-b's fake GPU; the node's
    probe attributes it to the run (by the run id in the actor's environment), the
    scheduler records it as the run's measured peak, and the same job submitted again is
    admitted on that calibrated estimate instead of the 8,000 MiB it declares."""
    from runhelpers import wait_until

    from evaltui.api.client import ApiClient
    from evaltui.rundir.jsonfiles import read_json

    sched_tests = Path(__file__).resolve().parents[1] / "scheduler"
    monkeypatch.syspath_prepend(str(sched_tests))
    from schedhelpers import line_spec, write_dataset

    dataset = write_dataset(tmp_path / "line.jsonl", [20] * 4)
    spec = line_spec(dataset, marginal_vram_mb=8000, vram_mb=3000, sleep_sec=0.1)
    spec["eval"].update(executor="ray", ray_address=fake_cluster.address, worker_count=1)
    server, url = serve(fake_cluster, tmp_path)
    try:
        with ApiClient(url) as client:
            first = Path(client.get_run(client.submit(spec).run_id).run_dir)
            wait_until(lambda: read_json(first / "scheduler.json")["state"] == "done",
                       timeout=120, what="the first run done")
            record = read_json(first / "scheduler.json")
            assert (record["estimate_source"], record["estimate_mb"]) == ("declared", 8000)
            assert record["measured_peak_mb"] == 3000, record
            second = Path(client.get_run(client.submit(spec).run_id).run_dir)
            wait_until(lambda: read_json(second / "scheduler.json").get("estimate_source")
                       == "calibrated", timeout=30, what="the second run calibrated")
            record = read_json(second / "scheduler.json")
            assert 3000 <= record["estimate_mb"] < 8000, record
            wait_until(lambda: read_json(second / "scheduler.json")["state"] == "done",
                       timeout=120, what="the second run done")
    finally:
        stop(server)
