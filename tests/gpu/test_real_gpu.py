"""Real device memory, measured as the scheduler measures it (``python -m pytest -m gpu``).

Each test allocates through the CUDA driver API (evaltui.gpu) and reads the GPU through
the scheduler's own NVML probe: free memory drops by what was allocated, NVML gives the
allocating PID its memory, a run's measured peak calibrates its nodesets, an exclusive
job has its GPU to itself, and two backends on one state dir never over-commit it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from gpuhelpers import (
    SLACK_MB,
    GpuUnderTest,
    Holder,
    holding_spec,
    read_gpu,
    record,
    session_of,
    summary,
    used_by,
    wait_until,
)

from evaltui.contract.states import RunState
from evaltui.scheduler.scheduler import JobScheduler

pytestmark = pytest.mark.gpu

MakeScheduler = Callable[..., JobScheduler]


def test_an_allocation_lowers_free_memory_by_its_size_and_counts_for_its_process(
        gpu: GpuUnderTest) -> None:
    n = gpu.alloc_mb
    with Holder() as holder:
        driver_before = holder.state["driver_free_mb"]
        before = read_gpu(gpu.index)
        mine_before = used_by(before, {holder.pid})
        assert mine_before, f"NVML does not list the holder (PID {holder.pid}) on GPU{gpu.index}"
        assert holder.command(f"alloc {n}")["held_mb"] == n
        after = read_gpu(gpu.index)
        drop = before.free_mb - after.free_mb
        assert n - SLACK_MB <= drop <= n + SLACK_MB, f"free fell by {drop} MiB for {n} MiB"
        assert after.used_mb - before.used_mb == pytest.approx(drop, abs=SLACK_MB)
        grown = (used_by(after, {holder.pid}) or 0) - mine_before
        assert n <= grown <= n + SLACK_MB, f"NVML gives the holder {grown} MiB more for {n} MiB"
        # The driver's own view of the device agrees with NVML's.
        driver_drop = driver_before - holder.state["driver_free_mb"]
        assert driver_drop == pytest.approx(drop, abs=SLACK_MB)
        holder.command("free")
        freed = read_gpu(gpu.index)
        assert freed.free_mb == pytest.approx(before.free_mb, abs=SLACK_MB)
        assert holder.exit() == 0
    wait_until(lambda: not used_by(read_gpu(gpu.index), {holder.pid}), 30,
               "the holder's memory to be released")


@pytest.mark.parametrize(("placement", "holders"),
                         [("inline", 1), ("replicated", 2), ("shared", 1)])
def test_a_runs_memory_is_measured_attributed_and_calibrates_its_nodesets(
        placement: str, holders: int, gpu: GpuUnderTest, make_scheduler: MakeScheduler,
        dataset: Path) -> None:
    n = gpu.alloc_mb
    per_process = n + gpu.context_mb
    # Long enough (~3.6 s) for the readings calibration asks of a run (sampling.py).
    spec = holding_spec(dataset, placement=placement, vram_mb=n, episodes=12 * holders,
                        sleep_sec=0.15, workers=holders if placement == "replicated" else 1,
                        marginal_vram_mb=holders * per_process + SLACK_MB)
    free_before = read_gpu(gpu.index).free_mb
    sched = make_scheduler().start()
    run_id, _ = sched.submit(spec)

    def holder_pids() -> set[int]:
        if placement == "shared":
            return {ns.pid for ns in sched.nodesets()}
        pid = record(sched.outputs, run_id).get("pid")
        reading = read_gpu(gpu.index)
        return {p.pid for p in reading.processes or () if pid and session_of(p.pid) == pid}

    def seen() -> tuple[set[int], int] | None:
        pids = holder_pids()
        reading = read_gpu(gpu.index)
        used = used_by(reading, pids)
        return (pids, used) if len(pids) == holders and used and used >= holders * n else None

    found = wait_until(lambda: seen() or sched.get_run(run_id).state.terminal, 120,
                       f"{holders} process(es) of the run holding {n} MiB")
    assert found is not True, (f"the run ended {sched.get_run(run_id).state}: "
                               f"{summary(sched.outputs, run_id).get('error')}")
    pids, used = found
    assert used <= holders * per_process + SLACK_MB
    assert free_before - read_gpu(gpu.index).free_mb >= holders * n - SLACK_MB
    # The scheduler's own reading (up to a probe interval old) shows the same processes.
    def scheduler_sees() -> bool:
        info = next(g for g in sched.resources().gpus if g.index == gpu.index)
        return info.processes is not None and {p.pid for p in info.processes} >= pids

    wait_until(scheduler_sees, 10, "the scheduler's reading of the run's processes")
    if placement == "shared":
        (ns,) = sched.nodesets()
        # Its own reservation, added when the run that asked for it is spawned.
        wait_until(lambda: any(r.run_id == f"nodeset:{ns.name}"
                               for r in sched.resources().ledger), 30, "the host's reservation")
    assert sched.wait(run_id, timeout=300) is RunState.DONE

    peak = record(sched.outputs, run_id)["measured_peak_mb"]
    if placement == "shared":
        assert peak == 0  # the run itself holds nothing: the host does
        # Learnt from the host's measured peak when it is unloaded, after the run.
        learned = wait_until(lambda: sched.calibration.peak("vram", ns.key), 60,
                             "the host's peak learnt")
        assert learned == pytest.approx(used, abs=SLACK_MB)
        expected = learned
    else:
        assert peak == pytest.approx(used, abs=SLACK_MB)
        expected = peak
    # The next run of the same nodesets is estimated from what this one really used.
    # (Learnt just after the run turns done; a job queued under the lock keeps the
    # estimate it was submitted with, so submit it only then.)
    wait_until(lambda: len(sched.calibration.entries()) == 2, 30, "env and policy learnt")
    sched.lock("test", ttl_sec=60)  # keep it queued to read its estimate
    again, _ = sched.submit(spec)
    (queued,) = [q for q in sched.queue() if q.run_id == again]
    assert queued.estimate_source == "calibrated"
    assert queued.estimate_mb == pytest.approx(expected, abs=2)  # per-nodeset rounding
    sched.cancel(again)


def test_an_exclusive_job_has_its_gpu_to_itself(gpu: GpuUnderTest,
                                               make_scheduler: MakeScheduler,
                                               dataset: Path) -> None:
    sched = make_scheduler().start()
    idle = next(g for g in sched.resources().gpus if g.index == gpu.index)
    if idle.runs:
        pytest.skip(f"GPU{gpu.index} runs {idle.runs} process(es) of others: exclusive "
                    "admission needs a GPU nothing else uses")
    n, declared = gpu.alloc_mb, gpu.alloc_mb + gpu.context_mb + SLACK_MB
    sessions: list[set[int]] = []
    stop = threading.Event()

    def sample() -> None:  # which sessions hold memory on the GPU, as NVML sees it
        while not stop.is_set():
            procs = read_gpu(gpu.index).processes or ()
            sessions.append({s for p in procs if (s := session_of(p.pid)) is not None})
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        busy, _ = sched.submit(holding_spec(dataset, placement="inline", vram_mb=n,
                                            episodes=12, marginal_vram_mb=declared, tag="busy"))
        wait_until(lambda: sched.get_run(busy).state is RunState.RUNNING, 120, "busy running")
        exclusive, _ = sched.submit(holding_spec(dataset, placement="inline", vram_mb=n,
                                                 episodes=6, marginal_vram_mb=declared,
                                                 exclusive=True, tag="exclusive"))
        small, _ = sched.submit(holding_spec(dataset, placement="inline", vram_mb=n,
                                             episodes=3, marginal_vram_mb=declared, tag="small"))

        def reason(run_id: str) -> str:
            return next((q.waiting_reason for q in sched.queue() if q.run_id == run_id), "")

        wait_until(lambda: reason(small).startswith("behind"), 30, "the small job held back")
        assert reason(exclusive) == f"waiting for exclusive use of GPU{gpu.index} (1 run on it)"
        for run_id in (busy, exclusive, small):
            assert sched.wait(run_id, timeout=300) is RunState.DONE
    finally:
        stop.set()
        sampler.join()
    runs = {run_id: record(sched.outputs, run_id)["pid"] for run_id in (busy, exclusive, small)}
    on_gpu = [{r for r, pid in runs.items() if pid in s} for s in sessions]
    assert any(exclusive in ids for ids in on_gpu), "never saw the exclusive job on the GPU"
    for ids in on_gpu:
        if exclusive in ids:
            assert ids == {exclusive}, f"beside the exclusive job on the GPU: {ids - {exclusive}}"
    ex, sm = record(sched.outputs, exclusive), record(sched.outputs, small)
    assert sm["admitted_at"] > ex["admitted_at"]  # not ahead of the exclusive job

