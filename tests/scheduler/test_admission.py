"""admission.decide: the rules of DESIGN §6 on hand-made views (no processes, no files)."""

from __future__ import annotations

import re

from evaltui.scheduler.admission.accounting import GpuView, HostView
from evaltui.scheduler.admission.decision import Admission, Candidate, WaitKind, decide

GIB = 1024
HOST = HostView(ram_total_mb=64 * GIB, ram_available_mb=60 * GIB, outstanding_mb=0)


def gpu(index: int, free_gb: float, total_gb: float = 24, *, outstanding_gb: float = 0,
        runs: int = 0, exclusive_run: str | None = None) -> GpuView:
    return GpuView(index, int(total_gb * GIB), int(free_gb * GIB), int(outstanding_gb * GIB),
                   runs, 0, exclusive_run)


def job(run_id: str, vram_gb: float, *, ram_gb: float = 1, exclusive: bool = False,
        needs_gpu: bool = True, since: float = 0.0) -> Candidate:
    return Candidate(run_id, int(vram_gb * GIB), int(ram_gb * GIB), exclusive, needs_gpu, since)


def test_estimate_against_free_minus_reservations() -> None:
    gpus = [gpu(0, free_gb=24, outstanding_gb=11.9)]
    admits, waits = decide([job("big", 20), job("small", 8)], gpus, HOST)
    assert admits == [Admission("small", 0)]
    assert waits["big"].kind is WaitKind.GPU_MEMORY
    assert waits["big"].reason == "needs 20.0 GiB on GPU0, 12.1 GiB free after reservations"


def test_admissions_in_one_tick_are_charged_against_each_other() -> None:
    admits, waits = decide([job("a", 10), job("b", 10), job("c", 10)], [gpu(0, 24)], HOST)
    assert [a.run_id for a in admits] == ["a", "b"]
    assert waits["c"].reason == "needs 10.0 GiB on GPU0, 4.0 GiB free after reservations"


def test_best_fit_keeps_a_whole_gpu_free() -> None:
    gpus = [gpu(0, 24), gpu(1, 6)]
    admits, _ = decide([job("small", 4), job("whole", 24)], gpus, HOST)
    assert admits == [Admission("small", 1), Admission("whole", 0)]


def test_host_ram_gates_every_job_and_is_the_only_gate_without_gpus() -> None:
    host = HostView(ram_total_mb=16 * GIB, ram_available_mb=8 * GIB, outstanding_mb=3 * GIB)
    admits, waits = decide([job("a", 30, ram_gb=4), job("b", 0, ram_gb=2)], None, host)
    assert admits == [Admission("a", None)]  # no GPU measured: VRAM is not a gate
    assert waits["b"].kind is WaitKind.HOST_RAM
    assert waits["b"].reason == "needs 2.0 GiB host RAM, 1.0 GiB available after reservations"


def test_a_job_known_not_to_use_vram_is_not_put_on_a_gpu() -> None:
    admits, _ = decide([job("cpu", 0, needs_gpu=False)], [gpu(0, 0.1)], HOST)
    assert admits == [Admission("cpu", None)]


def test_too_big_for_the_machine_says_so_and_blocks_nobody() -> None:
    admits, waits = decide([job("huge", 30), job("ok", 1)], [gpu(0, 24), gpu(1, 16, 16)], HOST)
    assert waits["huge"].kind is WaitKind.TOO_BIG
    assert waits["huge"].reason == "needs 30.0 GiB, more than any GPU has (largest: GPU0, 24.0 GiB)"
    assert admits == [Admission("ok", 1)]


def test_exclusive_waits_for_an_empty_gpu() -> None:
    _, waits = decide([job("ex", 4, exclusive=True)], [gpu(0, 20, runs=2)], HOST)
    assert waits["ex"].kind is WaitKind.EXCLUSIVE
    assert waits["ex"].reason == "waiting for exclusive use of GPU0 (2 runs on it)"
    admits, _ = decide([job("ex", 4, exclusive=True)], [gpu(0, 20, runs=0)], HOST)
    assert admits == [Admission("ex", 0)]


def test_nothing_joins_a_gpu_in_exclusive_use() -> None:
    gpus = [gpu(0, 20, runs=1, exclusive_run="ex")]
    admits, waits = decide([job("small", 1)], gpus, HOST)
    assert admits == []
    assert waits["small"].kind is WaitKind.EXCLUSIVE
    assert "GPU0 by ex" in waits["small"].reason


def test_jobs_behind_a_waiting_exclusive_job_do_not_take_its_gpu() -> None:
    gpus = [gpu(0, 20, runs=1)]
    admits, waits = decide([job("ex", 4, exclusive=True), job("small", 1)], gpus, HOST)
    assert admits == []
    assert waits["small"].kind is WaitKind.BEHIND
    assert waits["small"].reason == "behind exclusive job ex (no starvation)"


def test_the_claim_covers_one_gpu_others_stay_open() -> None:
    gpus = [gpu(0, 20, runs=1), gpu(1, 20, runs=3)]
    admits, waits = decide([job("ex", 4, exclusive=True), job("small", 1)], gpus, HOST)
    assert "GPU0" in waits["ex"].reason  # the GPU closest to idle is claimed
    assert admits == [Admission("small", 1)]


def test_higher_priority_jobs_ahead_of_the_exclusive_one_still_start() -> None:
    gpus = [gpu(0, 20, runs=1)]
    admits, waits = decide([job("urgent", 1), job("ex", 4, exclusive=True)], gpus, HOST)
    assert admits == [Admission("urgent", 0)]
    assert waits["ex"].kind is WaitKind.EXCLUSIVE


def test_exclusive_job_is_not_starved_by_a_stream_of_small_ones() -> None:
    """Simulate ticks: small jobs keep arriving (each runs 3 ticks); the exclusive one,
    queued at tick 0, must start once the jobs admitted before it have drained."""
    running: dict[str, int] = {"r0": 3, "r1": 2}  # run_id -> ticks left
    queue = [job("ex", 8, exclusive=True)]
    started_at = None
    for t in range(40):
        running = {k: v - 1 for k, v in running.items() if v > 1}
        queue.append(job(f"s{t}", 2))  # a new small job every tick, behind the exclusive one
        used = 2 * GIB * len(running)
        view = gpu(0, (24 * GIB - used) / GIB, runs=len(running),
                   exclusive_run="ex" if "ex" in running else None)
        admits, _ = decide(queue, [view], HOST)
        for a in admits:
            running[a.run_id] = 3
            queue = [c for c in queue if c.run_id != a.run_id]
            if a.run_id == "ex":
                started_at = t
    assert started_at is not None and started_at <= 4


def test_a_big_job_waiting_long_claims_its_gpu() -> None:
    gpus = [gpu(0, 10)]
    cands = [job("big", 20, since=0.0), job("small", 1, since=50.0)]
    admits, _ = decide(cands, gpus, HOST, now=60.0, claim_after_sec=120.0)
    assert admits == [Admission("small", 0)]  # not waiting long enough yet: small ones go on
    admits, waits = decide(cands, gpus, HOST, now=200.0, claim_after_sec=120.0)
    assert admits == []
    assert waits["small"].reason == "behind job big (no starvation)"


def test_lock_admits_nothing_and_every_job_says_why() -> None:
    reason = "interactive lock held by alice until 10:42:03"
    admits, waits = decide([job("a", 1), job("b", 0, needs_gpu=False)], [gpu(0, 24)], HOST,
                           lock_reason=reason)
    assert admits == []
    assert {w.kind for w in waits.values()} == {WaitKind.LOCK}
    assert all(re.fullmatch(r"interactive lock held by alice until \d\d:\d\d:\d\d", w.reason)
               for w in waits.values())


def test_queue_order_decides_who_gets_scarce_memory() -> None:
    gpus = [gpu(0, 10)]
    admits, _ = decide([job("first", 8), job("second", 8)], gpus, HOST)
    assert admits == [Admission("first", 0)]


# ---- CPU cores (issue 34) ----------------------------------------------------------------


def on_cores(total: float, reserved: float = 0.0) -> HostView:
    return HostView(ram_total_mb=64 * GIB, ram_available_mb=60 * GIB, outstanding_mb=0,
                    cpu_total=total, cpu_reserved=reserved)


def cpu_job(run_id: str, cpus: float, since: float = 0.0) -> Candidate:
    return Candidate(run_id, 0, GIB, needs_gpu=False, waiting_since=since, cpus=cpus)


def test_cores_are_charged_like_memory_and_the_wait_says_how_many() -> None:
    admits, waits = decide([cpu_job("a", 2), cpu_job("b", 4), cpu_job("c", 1)], None,
                           on_cores(4, reserved=1))
    assert [a.run_id for a in admits] == ["a", "c"]
    assert waits["b"].kind is WaitKind.CPU
    assert waits["b"].reason == "needs 4 cores, 1 core free after reservations"


def test_a_lone_run_needing_more_cores_than_the_machine_starts_and_says_so() -> None:
    admits, waits = decide([cpu_job("k4", 4), cpu_job("next", 1)], None, on_cores(2))
    assert [a.run_id for a in admits] == ["k4"]
    assert admits[0].note == "needs 4 cores, more than the machine's 2 cores: started alone, " \
                             "oversubscribed"
    assert waits["next"].reason == "needs 1 core, 0 cores free after reservations"
    # Not alone: it waits like any other.
    admits, waits = decide([cpu_job("k4", 4)], None, on_cores(2, reserved=0.5))
    assert admits == [] and waits["k4"].kind is WaitKind.CPU


def test_a_long_cpu_wait_holds_cores_back_from_jobs_behind_it() -> None:
    admits, waits = decide([cpu_job("big", 3, since=0.0), cpu_job("small", 1)], None,
                           on_cores(4, reserved=2), now=500.0, claim_after_sec=120.0)
    assert admits == [] and waits["small"].kind is WaitKind.BEHIND
    admits, _ = decide([cpu_job("big", 3, since=450.0), cpu_job("small", 1)], None,
                       on_cores(4, reserved=2), now=500.0, claim_after_sec=120.0)
    assert [a.run_id for a in admits] == ["small"]  # not waited long: small ones backfill


def test_cores_gate_gpu_jobs_too_and_unmeasured_cores_gate_nothing() -> None:
    gpu_jobs = [Candidate("g1", GIB, GIB, cpus=2), Candidate("g2", GIB, GIB, cpus=2)]
    admits, waits = decide(gpu_jobs, [gpu(0, 24)], on_cores(3))
    assert [a.run_id for a in admits] == ["g1"] and waits["g2"].kind is WaitKind.CPU
    admits, _ = decide(gpu_jobs, [gpu(0, 24)], HOST)  # cpu_total 0: not measured
    assert len(admits) == 2
