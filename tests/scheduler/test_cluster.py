"""Cluster admission without Ray: NodeGpu keys through admission.decide, and the cluster
ledger's rules (LedgerActor is a plain class; Ray only makes it remote)."""

from __future__ import annotations

import dataclasses
import time

from evaltui.scheduler.admission.accounting import GpuView, HostView
from evaltui.scheduler.admission.decision import Candidate, WaitKind, decide
from evaltui.scheduler.admission.gpukey import NodeGpu
from evaltui.scheduler.admission.resources import GpuSnapshot
from evaltui.scheduler.cluster.keys import ClusterReservation, cluster_views
from evaltui.scheduler.cluster.ledger import LedgerActor

A0, B0 = NodeGpu("aaaa" * 14, 0, "node-a"), NodeGpu("bbbb" * 14, 0, "node-b")
HOST = HostView(64_000, 60_000, 0)


def view(key: NodeGpu, free: int, runs: int = 0, holder: str | None = None) -> GpuView:
    return GpuView(key, 24576, free, 0, runs, 0, holder)


def test_16gib_jobs_go_one_per_node_and_the_third_waits_naming_node_and_gpu() -> None:
    jobs = [Candidate(f"r{i}", 16384, 100) for i in range(3)]
    admits, waits = decide(jobs, [view(A0, 24576), view(B0, 24576)], HOST)
    assert {a.gpu for a in admits} == {A0, B0}
    assert waits["r2"].kind is WaitKind.NO_NODE
    assert waits["r2"].reason == "needs 16.0 GiB; node-a GPU0 has 8.0 GiB free after reservations"


def test_best_fit_and_exclusive_hold_across_nodes() -> None:
    admits, _ = decide([Candidate("small", 4096, 1)], [view(A0, 24576), view(B0, 6000)], HOST)
    assert admits[0].gpu == B0  # the tightest fit keeps node-a's GPU whole
    admits, waits = decide([Candidate("x", 1024, 1, exclusive=True)],
                           [view(A0, 20000, runs=1), view(B0, 20000, runs=2)], HOST)
    assert not admits and waits["x"].kind is WaitKind.EXCLUSIVE
    assert "node-a GPU0 (1 run on it)" in waits["x"].reason


def test_cluster_views_count_every_reservation_whole() -> None:
    gpus = [GpuSnapshot(A0, "fake", 24576, 0, 24576, None, None),
            GpuSnapshot(B0, "fake", 24576, 0, 24576, None, None)]
    entries = [ClusterReservation("s1", "r1", A0.node_id, 0, 10240, False, 0.0),
               ClusterReservation("s2", "r2", A0.node_id, 0, 4096, True, 0.0)]
    a, b = cluster_views(gpus, entries)
    assert (a.available_mb, a.runs, a.exclusive_run) == (24576 - 14336, 2, "r2")
    assert (b.available_mb, b.runs, b.exclusive_run) == (24576, 0, None)


def test_the_ledger_refuses_over_commit_and_respects_exclusive() -> None:
    ledger = LedgerActor()
    assert ledger.reserve("s1", "r1", A0.node_id, 0, 16384, False, 24576, "node-a") is None
    refused = ledger.reserve("s2", "r2", A0.node_id, 0, 16384, False, 24576, "node-a")
    assert refused == "needs 16.0 GiB; node-a GPU0 has 8.0 GiB free after reservations"
    assert ledger.reserve("s2", "r3", A0.node_id, 0, 1024, True, 24576, "node-a") is not None
    assert ledger.reserve("s2", "r3", B0.node_id, 0, 1024, True, 24576, "node-b") is None
    assert ledger.reserve("s1", "r4", B0.node_id, 0, 1024, False, 24576, "node-b") \
        == "node-b GPU0 is in exclusive use by r3"
    assert all(a["reserved_after"] <= 24576 for a in ledger.audit())


def test_ended_runs_are_released_and_a_dead_schedulers_lease_purges_its_reservations(
        ) -> None:
    ledger = LedgerActor()
    ledger.reserve("s1", "r1", A0.node_id, 0, 8192, False, 24576, lease_sec=0.2)
    ledger.reserve("s2", "r2", B0.node_id, 0, 8192, False, 24576, lease_sec=30)
    key = ("s2", "r2")  # past the spawn grace, as a run that ran for a while
    ledger._res[key] = dataclasses.replace(ledger._res[key], at=time.time() - 10)
    assert [e["run_id"] for e in ledger.sync("s2", [], 30)] == ["r1"]  # r2 ended
    time.sleep(0.3)
    assert ledger.sync("s2", [], 30) == []  # s1 stopped renewing: purged
    assert [a["op"] for a in ledger.audit()] == ["admit", "admit", "release", "purge"]


def test_a_ledger_restarted_empty_learns_the_live_reservations_again() -> None:
    ledger = LedgerActor()
    held = {"scheduler": "s1", "run_id": "r1", "node_id": A0.node_id, "index": 0,
            "vram_mb": 8192, "exclusive": False, "at": time.time()}
    assert [e["run_id"] for e in ledger.sync("s1", [held])] == ["r1"]
    assert ledger.reserve("s2", "r2", A0.node_id, 0, 20000, False, 24576) is not None


def test_a_moved_run_is_released_on_its_old_gpu_and_found_by_its_id() -> None:
    """What a run whose node left reads back (engine/executor/ray/placement.py): the ledger's
    current entry for its id; the move is audited as a release then an admit."""
    ledger = LedgerActor()
    assert ledger.placement("r1") is None
    assert ledger.reserve("s1", "r1", A0.node_id, 0, 16384, False, 24576, "node-a") is None
    assert ledger.reserve("s1", "r1", B0.node_id, 0, 16384, False, 24576, "node-b") is None
    assert [(e["node_id"], e["node"]) for e in ledger.entries()] == [(B0.node_id, "node-b")]
    where = ledger.placement("r1")
    assert where is not None and (where["node_id"], where["index"]) == (B0.node_id, 0)
    ops = [(a["op"], a["node"], a["reserved_after"]) for a in ledger.audit()]
    assert ops == [("admit", "node-a", 16384), ("release", "node-a", 0),
                   ("admit", "node-b", 16384)]


def test_an_adopted_run_is_handed_over_not_counted_twice() -> None:
    ledger = LedgerActor()
    assert ledger.reserve("s1", "r1", A0.node_id, 0, 16384, False, 24576, "node-a") is None
    held = {"scheduler": "s1", "run_id": "r1", "node_id": A0.node_id, "index": 0,
            "vram_mb": 16384, "exclusive": False, "at": time.time(), "node": "node-a"}
    assert [(e["scheduler"], e["run_id"]) for e in ledger.sync("s2", [held])] == [("s2", "r1")]
    assert [(a["op"], a["scheduler"], a["reserved_after"]) for a in ledger.audit()] == [
        ("admit", "s1", 16384), ("handover", "s1", 0), ("restore", "s2", 16384)]
    assert ledger.reserve("s3", "r2", A0.node_id, 0, 8192, False, 24576, "node-a") is None


def test_where_a_node_attributes_usage_a_reservation_holds_back_only_what_its_run_lacks(
        ) -> None:
    entries = [ClusterReservation("s1", "r1", A0.node_id, 0, 10240, False, 0.0),
               ClusterReservation("s1", "r2", B0.node_id, 0, 10240, False, 0.0)]
    gpus = [GpuSnapshot(A0, "fake", 24576, 6000, 18576, None, None, {"r1": 6000}),
            GpuSnapshot(B0, "fake", 24576, 6000, 18576, None, None, None)]
    a, b = cluster_views(gpus, entries)
    assert (a.outstanding_mb, a.available_mb, a.foreign) == (4240, 18576 - 4240, 0)
    assert (b.outstanding_mb, b.available_mb) == (10240, 18576 - 10240)  # counted whole
    stray = [GpuSnapshot(A0, "fake", 24576, 9000, 15576, None, None, {"r1": 6000})]
    assert cluster_views(stray, entries[:1])[0].foreign == 1  # 3,000 MiB nobody's
