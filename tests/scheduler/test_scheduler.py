"""JobScheduler end to end: real run subprocesses on fake GPUs, real signals, real run dirs."""

from __future__ import annotations

import os
import re
import select
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

import pytest
from schedhelpers import group_members, line_spec, record, wait_until

from evaltui.contract.spec import SpecError
from evaltui.contract.states import RunState
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.admission.decision import WaitKind
from evaltui.scheduler.admission.resources import GpuReading, GpuSnapshot
from evaltui.scheduler.core import NotQueued, NotResumable, RunNotFound
from evaltui.scheduler.events import EpisodeFinished, RunStateChanged
from evaltui.scheduler.scheduler import JobScheduler

Make = Callable[..., JobScheduler]


def waiting(scheduler: JobScheduler, run_id: str) -> str:
    return next(q.waiting_reason for q in scheduler.queue() if q.run_id == run_id)


def test_submit_runs_on_a_fake_gpu_and_records_what_it_used(
        make_scheduler: Make, fake_gpus: Callable[[str], None], dataset: Path,
        tmp_path: Path) -> None:
    fake_gpus("2x24576")
    sched = make_scheduler()
    events: list[object] = []
    sched.add_listener(events.append)
    env_file = tmp_path / "env.txt"
    spec = line_spec(dataset, episodes=6, marginal_vram_mb=3000, vram_mb=2500, sleep_sec=0.05,
                     env_file=str(env_file))
    run_id, state = sched.submit(spec)
    assert state is RunState.QUEUED
    rec = record(sched.outputs, run_id)
    assert (rec["state"], rec["estimate_mb"], rec["estimate_source"]) == ("queued", 3000,
                                                                         "declared")
    sched.start()
    assert sched.wait(run_id, timeout=30) is RunState.DONE
    rec = record(sched.outputs, run_id)
    assert rec["state"] == "done" and rec["exit_code"] == 0
    assert rec["reservation"] == {"gpu": rec["gpu"], "mb": 3000, "ram_mb": rec["ram_estimate_mb"]}
    assert rec["measured_peak_mb"] == 2500  # what the run's process charged, measured live
    cuda, fake_index = env_file.read_text().split()
    assert cuda == fake_index == str(rec["gpu"])
    def states() -> list[RunState]:
        return [e.state for e in events if isinstance(e, RunStateChanged) and e.run_id == run_id]

    wait_until(lambda: RunState.DONE in states(), what="the done event")  # emitted after wait()
    states = states()
    assert states[0] is RunState.QUEUED and states[-1] is RunState.DONE
    assert RunState.STARTING in states
    finished = sorted(e.episode_index for e in events if isinstance(e, EpisodeFinished))
    assert finished == [0, 1, 2, 3, 4, 5]
    # The measured peak is learned: the next run of the same nodesets is estimated by it
    # (read from its record: the running scheduler may admit it before a queue read)
    again, _ = sched.submit(spec)
    assert record(sched.outputs, again)["estimate_mb"] == 2500
    assert record(sched.outputs, again)["estimate_source"] == "calibrated"


def test_admission_waits_for_measured_memory_and_says_why(
        make_scheduler: Make, fake_gpus: Callable[[str], None], dataset: Path) -> None:
    fake_gpus("1x24576")
    sched = make_scheduler().start()
    hog, _ = sched.submit(line_spec(dataset, episodes=10, marginal_vram_mb=16384, vram_mb=16384,
                                    sleep_sec=0.1))
    wait_until(lambda: record(sched.outputs, hog).get("measured_peak_mb") == 16384,
               what="the hog's usage to be measured")
    second, _ = sched.submit(line_spec(dataset, episodes=1, marginal_vram_mb=12288))
    wait_until(lambda: waiting(sched, second).startswith("needs"), what="a reason")
    assert waiting(sched, second) == "needs 12.0 GiB on GPU0, 8.0 GiB free after reservations"
    res = sched.resources()
    assert res.gpus[0].used_mb == 16384 and res.gpus[0].reserved_mb == 0
    assert [r.run_id for r in res.ledger] == [hog]
    assert sched.get_run(second).state is RunState.QUEUED
    assert sched.wait(second, timeout=30) is RunState.DONE  # admitted once the hog is gone
    assert sched.get_run(hog).state is RunState.DONE


def test_interactive_lock_blocks_admission(make_scheduler: Make, dataset: Path) -> None:
    held_by_ui: list[str] = []
    sched = make_scheduler(lock_check=lambda: held_by_ui[0] if held_by_ui else None).start()
    sched.lock("alice", ttl_sec=60)
    run_id, _ = sched.submit(line_spec(dataset, episodes=1))
    wait_until(lambda: sched.queue()[0].waiting_kind == WaitKind.LOCK.value, what="lock reason")
    assert re.fullmatch(r"interactive lock held by alice until \d\d:\d\d:\d\d",
                        waiting(sched, run_id))
    time.sleep(0.2)
    assert sched.get_run(run_id).state is RunState.QUEUED
    held_by_ui.append("model playground open in the TUI")
    assert sched.unlock("alice")
    wait_until(lambda: waiting(sched, run_id) == "model playground open in the TUI",
               what="the callback's reason")
    held_by_ui.clear()
    assert sched.wait(run_id, timeout=30) is RunState.DONE


def test_queue_order_is_priority_then_age(make_scheduler: Make, dataset: Path) -> None:
    sched = make_scheduler()
    sched.lock("alice", ttl_sec=60)
    low, _ = sched.submit(line_spec(dataset, episodes=1, priority=-5))
    first, _ = sched.submit(line_spec(dataset, episodes=1))
    high, _ = sched.submit(line_spec(dataset, episodes=1, priority=10))
    second, _ = sched.submit(line_spec(dataset, episodes=1))
    assert [q.run_id for q in sched.queue()] == [high, first, second, low]
    assert [q.position for q in sched.queue()] == [0, 1, 2, 3]
    sched.set_priority(low, 50)
    assert [q.run_id for q in sched.queue()] == [low, high, first, second]
    assert record(sched.outputs, low)["priority"] == 50
    sched.stop()
    restored = JobScheduler()  # the order survives a restart
    assert [q.run_id for q in restored.queue()] == [low, high, first, second]
    with pytest.raises(ValueError):
        restored.set_priority(first, 1000)
    restored.cancel(first)
    with pytest.raises(NotQueued):
        restored.set_priority(first, 1)
    restored.stop()


def test_exclusive_job_waits_for_its_gpu_and_holds_back_later_jobs(
        make_scheduler: Make, fake_gpus: Callable[[str], None], dataset: Path) -> None:
    fake_gpus("1x24576")
    sched = make_scheduler().start()
    busy, _ = sched.submit(line_spec(dataset, episodes=10, marginal_vram_mb=2048, vram_mb=2048,
                                     sleep_sec=0.05))
    wait_until(lambda: sched.get_run(busy).state in (RunState.STARTING, RunState.RUNNING))
    busy_alive = AliveWatch(record(sched.outputs, busy)["pid"])
    exclusive, _ = sched.submit(line_spec(dataset, episodes=1, marginal_vram_mb=4096,
                                          exclusive=True))
    small, _ = sched.submit(line_spec(dataset, episodes=1, marginal_vram_mb=1024))
    wait_until(lambda: waiting(sched, small).startswith("behind"), what="behind reason")
    assert waiting(sched, exclusive) == "waiting for exclusive use of GPU0 (1 run on it)"
    assert waiting(sched, small) == f"behind exclusive job {exclusive} (no starvation)"
    assert sched.wait(exclusive, timeout=30) is RunState.DONE
    assert sched.wait(small, timeout=30) is RunState.DONE
    ex_rec, small_rec = (record(sched.outputs, r) for r in (exclusive, small))
    # Nothing else ran beside it: admitted once the busy run's process had ended (its
    # reservation dies with it), which may be a tick before its finished_at is recorded.
    assert _epoch(ex_rec["admitted_at"]) >= busy_alive.last_seen_alive()
    assert small_rec["admitted_at"] > ex_rec["admitted_at"]


class AliveWatch:
    """When a process was last seen alive (a lower bound of the moment it ended), polled
    through a pidfd on a thread until it ends."""

    def __init__(self, pid: int) -> None:
        self._fd = os.pidfd_open(pid)
        self._last = time.time()
        self._done = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        while True:
            before = time.time()
            if poller.poll(5):  # readable once the process has ended
                break
            self._last = before  # it was alive at ``before``: the poll saw it after
        os.close(self._fd)
        self._done.set()

    def last_seen_alive(self, timeout: float = 30.0) -> float:
        assert self._done.wait(timeout), "the process did not end"
        return self._last


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def test_cancel_a_queued_job_reports_it_left_the_queue(make_scheduler: Make,
                                                      dataset: Path) -> None:
    sched = make_scheduler()
    events: list[object] = []
    sched.add_listener(events.append)
    sched.lock("alice", ttl_sec=60)
    run_id, _ = sched.submit(line_spec(dataset, episodes=1))
    sched.cancel(run_id)
    changes = [(e.previous, e.state) for e in events
               if isinstance(e, RunStateChanged) and e.run_id == run_id]
    assert changes == [(None, RunState.QUEUED), (RunState.QUEUED, RunState.CANCELLED)]
    assert record(sched.outputs, run_id)["state"] == "cancelled"  # memory and disk agree


def test_cancel_a_queued_job(make_scheduler: Make, dataset: Path) -> None:
    sched = make_scheduler()
    sched.lock("alice", ttl_sec=60)
    run_id, _ = sched.submit(line_spec(dataset, episodes=1))
    assert sched.cancel(run_id) is RunState.CANCELLED
    assert sched.queue() == []
    rec = record(sched.outputs, run_id)
    assert rec["pid"] is None and rec["cancel_requested_at"] is not None
    sched.unlock()
    sched.tick()
    assert sched.get_run(run_id).state is RunState.CANCELLED
    assert JobScheduler().get_run(run_id).state is RunState.CANCELLED  # not re-queued


def test_cancel_a_running_job_leaves_no_process(make_scheduler: Make, dataset: Path,
                                                tmp_path: Path) -> None:
    sched = make_scheduler(cancel_grace_sec=1.0).start()
    pid_file = tmp_path / "child.pid"
    run_id, _ = sched.submit(line_spec(dataset, policy="StubbornPolicy",
                                       pid_file=str(pid_file), sleep_sec=0.2))
    child = int(wait_until(lambda: pid_file.exists() and pid_file.read_text(), what="child"))
    wait_until(lambda: sched.get_run(run_id).state is RunState.RUNNING, what="running")
    pgid = record(sched.outputs, run_id)["pid"]
    assert os.getpgid(child) == pgid  # the stubborn child is in the run's group
    sched.cancel(run_id)
    assert sched.wait(run_id, timeout=20) is RunState.CANCELLED
    # The TERM-ignoring child was SIGKILLed too (a zombie awaiting init's reaping is gone).
    wait_until(lambda: not group_members(pgid), timeout=5, what="the run's group to be empty")
    assert child not in group_members(pgid)
    rec = record(sched.outputs, run_id)
    assert rec["state"] == "cancelled" and rec["cancel_requested_at"] is not None
    summary = read_json(runs_root(sched.outputs) / run_id / "summary.json")
    assert summary["status"] == "cancelled"


def test_bad_spec_is_rejected_with_its_field_and_writes_nothing(
        make_scheduler: Make, dataset: Path) -> None:
    sched = make_scheduler().start()
    bad = line_spec(dataset, episodes=1)
    bad["eval"]["worker_count"] = 0
    with pytest.raises(SpecError) as err:
        sched.submit(bad)
    assert err.value.field == "eval.worker_count"
    missing = line_spec(dataset)
    missing["graph"]["nodesets"]["policy"]["impl"] = "sched_nodesets:NoSuchPolicy"
    with pytest.raises(SpecError) as err:
        sched.submit(missing)
    assert err.value.field == "graph.nodesets.policy.impl"
    assert not runs_root(sched.outputs).exists() or not any(runs_root(sched.outputs).iterdir())
    run_id, _ = sched.submit(line_spec(dataset, episodes=1))  # the queue keeps working
    assert sched.wait(run_id, timeout=30) is RunState.DONE


def test_resume_reruns_what_is_not_ok_into_the_same_run_dir(
        make_scheduler: Make, dataset: Path) -> None:
    sched = make_scheduler(cancel_grace_sec=5.0).start()
    run_id, _ = sched.submit(line_spec(dataset, sleep_sec=0.05))
    run_dir = runs_root(sched.outputs) / run_id
    wait_until(lambda: len(list(run_dir.glob("episodes/ep*/episode.json"))) >= 3,
               what="a few episodes")
    sched.cancel(run_id)
    assert sched.wait(run_id, timeout=20) is RunState.CANCELLED
    before = {p.parent.name: read_json(p) for p in run_dir.glob("episodes/ep*/episode.json")}
    kept = {k for k, row in before.items() if row["status"] == "ok"}
    assert kept and len(kept) < 10
    with pytest.raises(NotResumable):
        sched.resume(run_id)
        sched.resume(run_id)  # queued again already
    assert sched.wait(run_id, timeout=30) is RunState.DONE
    after = {p.parent.name: read_json(p) for p in run_dir.glob("episodes/ep*/episode.json")}
    assert len(after) == 10 and all(r["status"] == "ok" for r in after.values())
    for name in kept:  # ok episodes were not re-run
        assert after[name]["finished_at"] == before[name]["finished_at"]
        assert after[name]["attempts"] == 1
    rerun = [n for n in before if n not in kept]
    for name in rerun:  # the one cut off by the cancel counts its second attempt
        assert after[name]["attempts"] == before[name]["attempts"] + 1
    rec = record(sched.outputs, run_id)
    assert rec["resume_count"] == 1 and rec["state"] == "done"
    with pytest.raises(NotResumable, match="ok already"):
        sched.resume(run_id)
    with pytest.raises(RunNotFound):
        sched.resume("../etc")


def test_without_nvml_admission_uses_host_resources(make_scheduler: Make, dataset: Path
                                                    ) -> None:
    sched = make_scheduler().start()  # no EVALTUI_FAKE_GPUS and no NVML on this machine
    res = sched.resources()
    assert not res.gpu_available and res.gpus == []
    assert res.gpu_reason is not None and res.gpu_reason.startswith("NVML unavailable")
    run_id, _ = sched.submit(line_spec(dataset, episodes=1, marginal_vram_mb=100_000))
    assert sched.wait(run_id, timeout=30) is RunState.DONE
    rec = record(sched.outputs, run_id)
    assert rec["gpu"] is None and rec["reservation"]["ram_mb"] > 0
    huge = line_spec(dataset, episodes=1)
    sched.lock("x", 60)
    sched.unlock("x")
    assert sched.list_runs(state="done")[0].run_id == run_id
    assert sched.submit(huge)[1] is RunState.QUEUED


def test_status_reads(make_scheduler: Make, dataset: Path) -> None:
    sched = make_scheduler()
    with pytest.raises(RunNotFound):
        sched.get_run("../../etc")
    with pytest.raises(RunNotFound):
        sched.get_run("20990101_000000")
    sched.lock("alice", 60)
    a, _ = sched.submit(line_spec(dataset, episodes=1))
    b, _ = sched.submit(line_spec(dataset, episodes=1))
    runs = sched.list_runs()
    assert [r.run_id for r in runs] == sorted([a, b], reverse=True)
    assert all(r.state is RunState.QUEUED and r.waiting_reason for r in runs)
    assert sched.list_runs(state=RunState.DONE) == []


class TwoRealLookingGpus:
    """A GpuProbe standing in for NVML: two idle 16 GiB boards."""

    def read(self) -> GpuReading:
        gpus = tuple(GpuSnapshot(i, f"board {i}", 16384, 0, 16384, 0.0, ()) for i in (0, 1))
        return GpuReading(True, None, False, gpus)

    def close(self) -> None:
        pass


def test_real_gpus_are_handed_out_within_the_schedulers_own_mask(
        make_scheduler: Make, dataset: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # the backend itself may use GPU 1 only
    seen: list[dict[str, str]] = []

    def spawn(run_dir: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        seen.append(dict(env))
        return subprocess.Popen(["sh", "-c", "printf '{\"status\": \"done\"}' > summary.json;"
                                 " touch _DONE"], cwd=run_dir, start_new_session=True)

    sched = make_scheduler(gpu_probe=TwoRealLookingGpus(), spawner=spawn).start()
    run_id, _ = sched.submit(line_spec(dataset, episodes=1, marginal_vram_mb=1000))
    assert sched.wait(run_id, timeout=20) is RunState.DONE
    (env,) = seen
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert "EVALTUI_FAKE_GPU_INDEX" not in env
    assert record(sched.outputs, run_id)["gpu"] == 1


def test_a_sigkilled_run_is_aborted_with_the_signal_named(
        make_scheduler: Make, fake_gpus: Callable[[str], None], dataset: Path) -> None:
    """A run killed by a signal (exit -9, no _DONE) is aborted, not failed, and says why."""
    import signal

    fake_gpus("1x24576")
    sched = make_scheduler().start()
    run_id, _ = sched.submit(line_spec(dataset, episodes=6, sleep_sec=0.5))
    pid = wait_until(lambda: record(sched.outputs, run_id).get("pid"), what="the run's pid")
    wait_until(lambda: (runs_root(sched.outputs) / run_id / "summary.json").exists(),
               what="the run to start")
    os.killpg(pid, signal.SIGKILL)
    assert sched.wait(run_id, timeout=30) is RunState.ABORTED
    rec = record(sched.outputs, run_id)
    assert rec["state"] == "aborted" and rec["exit_code"] == -9
    assert rec["error"] == "killed by signal 9 (SIGKILL)"
    info = sched.get_run(run_id)
    assert info.state is RunState.ABORTED and info.error == "killed by signal 9 (SIGKILL)"


def test_a_torn_summary_reads_done_with_rows_and_metrics_rebuilt(
        make_scheduler: Make, fake_gpus: Callable[[str], None], dataset: Path) -> None:
    """A torn summary.json with _DONE present reads by _DONE and the exit code, with
    its metrics rebuilt."""
    fake_gpus("1x24576")
    sched = make_scheduler().start()
    run_id, _ = sched.submit(line_spec(dataset, episodes=4))
    assert sched.wait(run_id, timeout=30) is RunState.DONE
    summary_path = runs_root(sched.outputs) / run_id / "summary.json"
    whole = read_json(summary_path)
    summary_path.write_bytes(summary_path.read_bytes()[:100])  # torn
    info = sched.get_run(run_id)
    assert info.state is RunState.DONE
    assert info.summary is not None and "summary.json" in (info.summary.summary_unreadable or "")
    assert info.summary.metrics == whole["metrics"]
    assert info.summary.metrics_n == whole["metrics_n"]
    assert info.summary.episodes_finished == 4
