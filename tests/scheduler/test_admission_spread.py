"""Admission of runs with replicas over several GPUs (issue 22): pure decide, hand-made views."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from evaltui.engine.graph.replicas import ReplicaAsk
from evaltui.scheduler.admission.accounting import GpuView, HostView
from evaltui.scheduler.admission.decision import Admission, Candidate, WaitKind, decide

GIB = 1024
HOST = HostView(ram_total_mb=64 * GIB, ram_available_mb=60 * GIB, outstanding_mb=0)
PER_GPU = ReplicaAsk(None, 1)


def gpu(index: int, free_gb: float, total_gb: float = 24, *, runs: int = 0,
        exclusive_run: str | None = None) -> GpuView:
    return GpuView(index, int(total_gb * GIB), int(free_gb * GIB), 0, runs, 0, exclusive_run)


def four(*free_gb: float) -> list[GpuView]:
    return [gpu(i, f) for i, f in enumerate(free_gb or (24, 24, 24, 24))]


def rep(run_id: str, vram_gb: float, ask: ReplicaAsk = PER_GPU, *, exclusive: bool = False,
        since: float = 0.0, ram_gb: float = 1) -> Candidate:
    return Candidate(run_id, int(vram_gb * GIB), int(ram_gb * GIB), exclusive, True, since,
                     replicas=ask)


def one(run_id: str, vram_gb: float, *, exclusive: bool = False, since: float = 0.0
        ) -> Candidate:
    return Candidate(run_id, int(vram_gb * GIB), GIB, exclusive, True, since)


def test_per_gpu_takes_every_idle_gpu() -> None:
    admits, waits = decide([rep("r", 16)], four(), HOST)
    assert not waits
    assert len(admits) == 1 and admits[0].run_id == "r"
    assert sorted(admits[0].gpus) == [0, 1, 2, 3]
    assert admits[0].gpu == admits[0].gpus[0]


def test_per_gpu_takes_the_two_gpus_other_runs_leave_room_on() -> None:
    gpus = [gpu(0, 10, runs=1), gpu(1, 24), gpu(2, 8, runs=1), gpu(3, 24)]
    admits, _ = decide([rep("r", 16)], gpus, HOST)
    assert admits == [Admission("r", 1, (1, 3))]


def test_a_count_takes_that_many_best_fit_first() -> None:
    gpus = [gpu(0, 24), gpu(1, 17), gpu(2, 20), gpu(3, 24)]
    admits, _ = decide([rep("r", 16, ReplicaAsk(2, 1))], gpus, HOST)
    assert admits == [Admission("r", 1, (1, 2))]  # the tightest two, whole GPUs stay free


def test_waits_naming_every_gpu_when_fewer_than_min_replicas_fit() -> None:
    gpus = [gpu(0, 9.1, runs=1), gpu(1, 20), gpu(2, 24, exclusive_run="x"), gpu(3, 3, runs=2)]
    admits, waits = decide([rep("r", 14, ReplicaAsk(None, 2))], gpus, HOST)
    assert admits == []
    assert waits["r"].kind is WaitKind.GPU_MEMORY
    assert waits["r"].reason == ("needs 14.0 GiB on >= 2 GPUs; GPU0 9.1 free, "
                                 "GPU1 20.0 free (fits), GPU2 exclusive, GPU3 3.0 free")


def test_none_fits_at_all_waits() -> None:
    admits, waits = decide([rep("r", 16)], four(8, 8, 8, 8), HOST)
    assert admits == [] and waits["r"].kind is WaitKind.GPU_MEMORY
    assert waits["r"].reason.startswith("needs 16.0 GiB on >= 1 GPU; GPU0 8.0 free")


def test_more_gpus_than_the_machine_has_is_too_big_and_blocks_nobody() -> None:
    admits, waits = decide([rep("r", 16, ReplicaAsk(None, 5)), one("small", 4)], four(), HOST)
    assert waits["r"].kind is WaitKind.TOO_BIG
    assert waits["r"].reason == ("needs 16.0 GiB on >= 5 GPUs; the machine has 4 GPUs, 4 of "
                                 "them with 16.0 GiB or more (lower min_replicas or the "
                                 "per-replica need)")
    assert [a.run_id for a in admits] == ["small"]
    # A replica bigger than most GPUs: too big as well, with the count that could fit.
    gpus = [gpu(0, 24), gpu(1, 12, 12), gpu(2, 12, 12)]
    _, waits = decide([rep("r", 16, ReplicaAsk(None, 2))], gpus, HOST)
    assert waits["r"].kind is WaitKind.TOO_BIG and "1 of them with 16.0 GiB" in waits["r"].reason


def test_a_run_with_replicas_is_charged_so_the_next_job_sees_it() -> None:
    admits, waits = decide([rep("r", 16, ReplicaAsk(3, 1)), one("a", 16), one("b", 16)],
                           four(), HOST)
    assert admits[0] == Admission("r", 0, (0, 1, 2))
    assert admits[1] == Admission("a", 3)
    assert waits["b"].kind is WaitKind.GPU_MEMORY


def test_exclusive_replicas_take_only_empty_gpus_and_hold_them() -> None:
    gpus = [gpu(0, 20, runs=1), gpu(1, 24), gpu(2, 24), gpu(3, 24)]
    admits, waits = decide([rep("x", 8, exclusive=True), one("small", 1)], gpus, HOST)
    assert admits[0] == Admission("x", 1, (1, 2, 3))
    assert admits[1] == Admission("small", 0)  # the only GPU the exclusive run left


def test_a_long_waiting_run_with_replicas_claims_its_gpus() -> None:
    gpus = [gpu(0, 12, runs=1), gpu(1, 12, runs=1), gpu(2, 24), gpu(3, 4, runs=1)]
    queue = [rep("big", 16, ReplicaAsk(None, 3), since=0.0), one("s1", 8), one("s2", 8)]
    admits, waits = decide(queue, gpus, HOST, now=1000.0, claim_after_sec=120.0)
    # It claims the three roomiest GPUs (0, 1, 2): the small jobs behind it may not take
    # them, so they wait instead of filling what it waits for.
    assert waits["big"].kind is WaitKind.GPU_MEMORY
    assert admits == []
    assert waits["s1"].kind is WaitKind.GPU_MEMORY  # GPU3 has 4 GiB, the rest is claimed
    # Not waited long yet: no claim, the small jobs start.
    admits, _ = decide(queue, gpus, HOST, now=10.0, claim_after_sec=120.0)
    assert [a.run_id for a in admits] == ["s1", "s2"]


def test_per_gpu_without_gpus_is_one_replica_on_the_host() -> None:
    admits, waits = decide([rep("r", 16)], None, HOST)
    assert admits == [Admission("r", None)] and not waits


def test_a_job_ahead_claiming_a_gpu_keeps_the_replicas_off_it() -> None:
    gpus = [gpu(0, 20, runs=1), gpu(1, 22, runs=1), gpu(2, 23, runs=1)]
    queue = [one("x", 20, exclusive=True), rep("r", 8)]
    admits, waits = decide(queue, gpus, HOST)
    assert waits["x"].kind is WaitKind.EXCLUSIVE  # claims GPU2, the roomiest
    assert admits == [Admission("r", 0, (0, 1))]


asks = st.builds(lambda most, least: ReplicaAsk(None if most == 0 else max(most, least), least),
                 st.integers(0, 4), st.integers(1, 4))


@settings(max_examples=150, deadline=None)
@given(free=st.lists(st.integers(0, 24), min_size=1, max_size=4),
       jobs=st.lists(st.tuples(st.integers(1, 24), st.one_of(st.none(), asks), st.booleans()),
                     min_size=1, max_size=6))
def test_never_over_commits_and_takes_all_or_nothing(free: list[int], jobs: list) -> None:
    gpus = [gpu(i, f) for i, f in enumerate(free)]
    cands = [Candidate(f"j{n}", gb * GIB, 0, excl, True, 0.0, replicas=ask)
             for n, (gb, ask, excl) in enumerate(jobs)]
    admits, waits = decide(cands, gpus, HOST)
    by_id = {c.run_id: c for c in cands}
    used = {g.index: 0 for g in gpus}
    for a in admits:
        c = by_id[a.run_id]
        held = a.gpus or ((a.gpu,) if a.gpu is not None else ())
        if c.replicas is not None:
            assert len(set(held)) == len(held) >= c.replicas.least
            if c.replicas.most is not None:
                assert len(held) <= c.replicas.most
        for g in held:
            used[g] += c.vram_mb
    for g in gpus:
        assert used[g.index] <= g.free_mb  # no GPU over-committed
    assert set(waits) | {a.run_id for a in admits} == set(by_id)
    assert not set(waits) & {a.run_id for a in admits}


def test_the_same_ask_twice_is_decided_against_what_the_first_took() -> None:
    admits, waits = decide([rep("a", 16, ReplicaAsk(2, 1)), rep("b", 16, ReplicaAsk(2, 1)),
                            rep("c", 16, ReplicaAsk(2, 1))], four(), HOST)
    assert admits == [Admission("a", 0, (0, 1)), Admission("b", 2, (2, 3))]
    assert waits["c"].reason.startswith("needs 16.0 GiB on >= 1 GPU; GPU0 8.0 free")
