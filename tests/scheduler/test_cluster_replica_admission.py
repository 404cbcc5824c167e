"""Runs with replicas on a Ray cluster, without Ray: admission over NodeGpu keys (the same
rules as on one machine, reasons naming node GPUs), the cluster ledger's all-or-nothing
reservation of every node GPU, and the pin the run's executor reads (issue 22, item 4)."""

from __future__ import annotations

import json

from evaltui.engine.executor.ray.resources import REPLICA_GPUS_ENV
from evaltui.engine.graph.replicas import ReplicaAsk
from evaltui.scheduler.admission.accounting import GpuView, HostView
from evaltui.scheduler.admission.decision import Admission, Candidate, WaitKind, decide
from evaltui.scheduler.admission.gpukey import NodeGpu, base_run, part_id
from evaltui.scheduler.cluster.keys import replicas_env
from evaltui.scheduler.cluster.ledger import LedgerActor

A0, A1 = NodeGpu("aaaa" * 14, 0, "node-a"), NodeGpu("aaaa" * 14, 1, "node-a")
B0 = NodeGpu("bbbb" * 14, 0, "node-b")
HOST = HostView(64_000, 60_000, 0)
GIB = 1024


def view(key: NodeGpu, free_gb: float, runs: int = 0, holder: str | None = None) -> GpuView:
    return GpuView(key, 24 * GIB, int(free_gb * GIB), 0, runs, 0, holder)


def rep(run_id: str, vram_gb: float, ask: ReplicaAsk) -> Candidate:
    return Candidate(run_id, int(vram_gb * GIB), GIB, False, True, 0.0, replicas=ask)


def test_per_gpu_takes_every_node_gpu_that_fits_tightest_first() -> None:
    gpus = [view(A0, 24), view(A1, 10, runs=1), view(B0, 18, runs=1)]
    admits, waits = decide([rep("r", 16, ReplicaAsk(None, 1))], gpus, HOST)
    assert not waits
    assert admits == [Admission("r", B0, (B0, A0))]


def test_waits_naming_node_gpus_when_min_replicas_cannot_be_met() -> None:
    gpus = [view(A0, 20), view(A1, 9.1, runs=1), view(B0, 24, runs=1, holder="x")]
    admits, waits = decide([rep("r", 14, ReplicaAsk(None, 2))], gpus, HOST)
    assert admits == []
    assert waits["r"].kind is WaitKind.GPU_MEMORY
    assert waits["r"].reason == ("needs 14.0 GiB on >= 2 GPUs; node-a GPU0 20.0 free (fits), "
                                 "node-a GPU1 9.1 free, node-b GPU0 exclusive")


def test_min_replicas_above_the_node_gpus_waits_as_too_big() -> None:
    admits, waits = decide([rep("r", 16, ReplicaAsk(None, 3))], [view(A0, 24), view(B0, 24)],
                           HOST)
    assert admits == [] and waits["r"].kind is WaitKind.TOO_BIG


def test_the_ledger_reserves_every_node_gpu_or_none() -> None:
    ledger = LedgerActor()
    assert ledger.reserve("s1", "other", B0.node_id, 0, 16 * GIB, False, 24 * GIB,
                          "node-b") is None
    gpus = [[A0.node_id, 0, 24 * GIB, "node-a"], [A1.node_id, 1, 24 * GIB, "node-a"],
            [B0.node_id, 0, 24 * GIB, "node-b"]]
    refused = ledger.reserve_all("s2", "r", gpus, 16 * GIB, False)
    assert refused == "needs 16.0 GiB; node-b GPU0 has 8.0 GiB free after reservations"
    assert [e["run_id"] for e in ledger.entries()] == ["other"]  # node-a's two not taken
    assert ledger.reserve_all("s2", "r", gpus[:2], 16 * GIB, False) is None
    held = {(e["run_id"], e["node_id"], e["index"]) for e in ledger.entries()}
    assert held == {("other", B0.node_id, 0), ("r", A0.node_id, 0), ("r#1", A1.node_id, 1)}
    # Each GPU counts its own replica: a second run of 16 GiB fits on neither node-a GPU.
    assert ledger.reserve_all("s1", "q", gpus[:1], 16 * GIB, False) is not None
    # The run follows its first GPU (where its other actors are) in placement().
    placed = ledger.placement("r")
    assert placed is not None and (placed["node_id"], placed["index"]) == (A0.node_id, 0)
    # The scheduler's sync lists the parts too; a run it no longer lists loses them all.
    live = [e for e in ledger.entries() if e["scheduler"] == "s2"]
    ledger.sync("s2", live)
    assert len([e for e in ledger.entries() if e["scheduler"] == "s2"]) == 2
    ledger.release("s2", ["r", "r#1"])
    assert [e["run_id"] for e in ledger.entries()] == ["other"]
    assert all(a["reserved_after"] <= 24 * GIB for a in ledger.audit())


def test_part_ids_and_the_pin_of_every_node_gpu() -> None:
    assert [part_id("run1", i) for i in range(3)] == ["run1", "run1#1", "run1#2"]
    assert {base_run(part_id("run1", i)) for i in range(3)} == {"run1"}
    pinned = json.loads(replicas_env([B0, A0])[REPLICA_GPUS_ENV])
    assert pinned == [[B0.node_id, 0, "node-b"], [A0.node_id, 0, "node-a"]]


def test_the_executor_reads_the_node_gpus_and_its_first_replica_follows_a_move() -> None:
    import pytest

    pytest.importorskip("ray", reason="ray is not installed (pip install 'evaltui[ray]')")
    from evaltui.engine.executor.ray.placement import ActorPlacement, replica_gpus
    from evaltui.engine.executor.ray.resources import NODE_GPU_ENV, NODE_ID_ENV, RUN_ID_ENV

    env = {NODE_ID_ENV: A0.node_id, NODE_GPU_ENV: "0", RUN_ID_ENV: "r",
           **replicas_env([A0, A1, B0])}
    where = ActorPlacement(env)
    assert where.replica_gpus == [(A0.node_id, 0, "node-a"), (A1.node_id, 1, "node-a"),
                                  (B0.node_id, 0, "node-b")]
    # node-a left; its scheduler moved the run's first GPU to node-c: node-a's other
    # replica is gone with it (its GPU released), node-b's stays.
    where._move("cccc" * 14, 2, "node-c")
    assert where.replica_gpus == [("cccc" * 14, 2, "node-c"), (B0.node_id, 0, "node-b")]
    # Not pinned (SPREAD), or a malformed list: no node GPUs (one replica as before).
    assert ActorPlacement({**env, NODE_ID_ENV: ""}).replica_gpus == []
    assert replica_gpus({REPLICA_GPUS_ENV: "[[1]]"}) == []


def test_a_scheduler_adopting_a_run_with_replicas_takes_over_every_gpu_of_it() -> None:
    ledger = LedgerActor()
    gpus = [[A0.node_id, 0, 24 * GIB, "node-a"], [B0.node_id, 0, 24 * GIB, "node-b"]]
    assert ledger.reserve_all("dead", "r", gpus, 16 * GIB, False) is None
    first = next(e for e in ledger.entries() if e["run_id"] == "r")
    ledger.sync("heir", [first])  # the restarted scheduler lists the run it adopted
    owners = {e["run_id"]: e["scheduler"] for e in ledger.entries()}
    assert owners == {"r": "heir", "r#1": "heir"}
    ops = [(a["op"], a["run_id"]) for a in ledger.audit()]
    assert ops[-4:] == [("handover", "r"), ("restore", "r"), ("handover", "r#1"),
                        ("restore", "r#1")]
    # Listed by the heir from then on, it stays; the dead scheduler's lease no longer counts.
    ledger.sync("heir", ledger.entries(), lease_sec=10)
    assert len(ledger.entries()) == 2


def test_an_exclusive_run_with_replicas_is_named_by_its_run_on_every_gpu() -> None:
    from evaltui.scheduler.admission.resources import GpuSnapshot
    from evaltui.scheduler.cluster.keys import ClusterReservation, cluster_views

    ledger = LedgerActor()
    gpus = [[A0.node_id, 0, 24 * GIB, "node-a"], [B0.node_id, 0, 24 * GIB, "node-b"]]
    assert ledger.reserve_all("s1", "x", gpus, 4 * GIB, True) is None
    assert ledger.reserve("s2", "y", B0.node_id, 0, GIB, False, 24 * GIB, "node-b") == \
        "node-b GPU0 is in exclusive use by x"
    snaps = [GpuSnapshot(k, "fake", 24 * GIB, 0, 24 * GIB, None, None) for k in (A0, B0)]
    views = cluster_views(snaps, [ClusterReservation.from_json(e) for e in ledger.entries()])
    assert [v.exclusive_run for v in views] == ["x", "x"]
