"""Runs with replicas through a real scheduler on fake GPUs (issue 22): the GPUs each gets,
its environment, its record and one ledger entry per GPU, held until it ends, held again
after a restart; two scheduler processes never over-commit any GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
from schedhelpers import HERE, line_spec, record, wait_until, write_dataset

from evaltui.contract.pidref import PidRef
from evaltui.contract.states import RunState
from evaltui.gpu import fakegpu
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.admission.ledger import Ledger
from evaltui.scheduler.scheduler import JobScheduler

Make = Callable[..., JobScheduler]
GIB = 1024
CAPACITY_MB = 24 * GIB

HOLD_RUN = """
printf '%s;%s' "$CUDA_VISIBLE_DEVICES" "$EVALTUI_FAKE_GPU_INDEX" > env.txt
while [ ! -e "$1" ]; do sleep 0.02; done
printf '{"status": "done"}' > summary.json
touch _DONE
"""


def holding_spawner(release: Path) -> Callable[[Path, Mapping[str, str]], subprocess.Popen]:
    """Runs that are shell processes writing their GPU environment, then holding until
    ``release/RUN_ID`` exists."""
    release.mkdir(exist_ok=True)

    def spawn(run_dir: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(["sh", "-c", HOLD_RUN, "sh", str(release / run_dir.name)],
                                cwd=run_dir,
                                env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    return spawn


def replica_spec(dataset: Path, vram_mb: int, replicas: Any = "per_gpu", least: int = 1,
                 tag: float = 0.0) -> dict[str, Any]:
    spec = line_spec(dataset, episodes=1, marginal_vram_mb=vram_mb, sleep_sec=tag)
    spec["graph"]["nodesets"]["policy"].update(parallelism="shared", replicas=replicas,
                                               min_replicas=least)
    return spec


def entries_of(sched: JobScheduler, run_id: str) -> list[tuple[int | None, int]]:
    return sorted((e.gpu, e.vram_mb) for e in sched.resources().ledger if e.run_id == run_id)


def running(sched: JobScheduler, run_id: str) -> bool:
    return sched.get_run(run_id).state in (RunState.STARTING, RunState.RUNNING)


def test_per_gpu_takes_four_idle_gpus_then_two_then_waits_saying_why(
        make_scheduler: Make, fake_gpus: Callable[[str], None], dataset: Path,
        tmp_path: Path) -> None:
    fake_gpus("4x24576")
    release = tmp_path / "release"
    sched = make_scheduler(spawner=holding_spawner(release))
    first, _ = sched.submit(replica_spec(dataset, 16 * GIB, tag=1))
    sched.tick()
    assert running(sched, first)
    rec = record(sched.outputs, first)
    assert rec["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"] and rec["gpu"] == 0
    assert rec["reservation"]["gpus"] == [0, 1, 2, 3]
    assert rec["reservation"]["each_mb"] == 16 * GIB
    assert entries_of(sched, first) == [(g, 16 * GIB) for g in range(4)]
    env_file = runs_root(sched.outputs) / first / "env.txt"
    env = wait_until(lambda: env_file.exists() and env_file.read_text(), what="env.txt")
    assert env == "0,1,2,3;0,1,2,3"

    # All four hold 16 GiB: the next run with replicas waits, naming every GPU.
    second, _ = sched.submit(replica_spec(dataset, 16 * GIB, tag=2))
    sched.tick()
    (waiting,) = sched.queue()
    assert waiting.run_id == second
    assert waiting.waiting_reason == ("needs 16.0 GiB on >= 1 GPU; GPU0 8.0 free, GPU1 8.0 "
                                      "free, GPU2 8.0 free, GPU3 8.0 free")
    (release / first).touch()
    assert sched.start().wait(first, timeout=20) is RunState.DONE
    # Gone with its process: every GPU's entry (and the second starts on all four).
    wait_until(lambda: running(sched, second), what="the second run to start")
    assert record(sched.outputs, second)["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert not entries_of(sched, first)
    sched.cancel(second)
    assert sched.wait(second, timeout=20) is RunState.CANCELLED
    wait_until(lambda: not entries_of(sched, second), what="the cancelled run's release")


def test_per_gpu_gets_the_two_gpus_other_runs_leave(
        make_scheduler: Make, fake_gpus: Callable[[str], None], dataset: Path,
        tmp_path: Path) -> None:
    fake_gpus("4x24576")
    sched = make_scheduler(spawner=holding_spawner(tmp_path / "release"))
    others = [sched.submit(line_spec(dataset, episodes=1, marginal_vram_mb=16 * GIB,
                                     sleep_sec=i))[0] for i in (1, 2)]
    rep, _ = sched.submit(replica_spec(dataset, 16 * GIB, least=2, tag=3))
    sched.tick()
    assert [record(sched.outputs, r)["gpu"] for r in others] == [0, 1]
    assert record(sched.outputs, rep)["gpus"] == ["GPU2", "GPU3"]
    assert entries_of(sched, rep) == [(2, 16 * GIB), (3, 16 * GIB)]
    # A run with one replica still names its GPU in ``gpus``.
    last, _ = sched.submit(replica_spec(dataset, 4 * GIB, replicas=1, tag=4))
    sched.tick()
    assert record(sched.outputs, last)["gpus"] == ["GPU0"]


def test_min_replicas_above_what_fits_waits_and_above_the_machine_is_too_big(
        make_scheduler: Make, fake_gpus: Callable[[str], None], dataset: Path,
        tmp_path: Path) -> None:
    fake_gpus("4x24576")
    sched = make_scheduler(spawner=holding_spawner(tmp_path / "release"))
    others = [sched.submit(line_spec(dataset, episodes=1, marginal_vram_mb=16 * GIB,
                                     sleep_sec=i))[0] for i in (1, 2, 3)]
    short, _ = sched.submit(replica_spec(dataset, 16 * GIB, least=2, tag=4))
    huge, _ = sched.submit(replica_spec(dataset, 16 * GIB, least=5, tag=5))
    sched.tick()
    assert all(running(sched, r) for r in others)
    waits = {q.run_id: q for q in sched.queue()}
    assert waits[short].waiting_reason == ("needs 16.0 GiB on >= 2 GPUs; GPU0 8.0 free, "
                                           "GPU1 8.0 free, GPU2 8.0 free, GPU3 24.0 free "
                                           "(fits)")
    assert waits[short].waiting_kind == "gpu_memory"
    assert waits[huge].waiting_kind == "too_big"
    assert "needs 16.0 GiB on >= 5 GPUs; the machine has 4 GPUs" in waits[huge].waiting_reason
    assert not entries_of(sched, short)  # nothing held for a run that waits


def test_per_gpu_without_gpus_is_one_replica_on_the_host_said_once(
        make_scheduler: Make, dataset: Path, tmp_path: Path) -> None:
    sched = make_scheduler(spawner=holding_spawner(tmp_path / "release"))
    run_id, _ = sched.submit(replica_spec(dataset, 16 * GIB))
    sched.tick()
    assert running(sched, run_id)
    rec = record(sched.outputs, run_id)
    assert rec["gpu"] is None and "gpus" not in rec
    assert rec["warnings"].count("replicas: no GPU is measured here; one replica on the "
                                 "host") == 1


def test_a_restarted_scheduler_holds_every_gpu_of_a_run_again(
        popen: Callable[..., subprocess.Popen[bytes]], make_scheduler: Make,
        fake_gpus: Callable[[str], None], dataset: Path, tmp_path: Path) -> None:
    fake_gpus("4x24576")
    specs = tmp_path / "specs.json"
    specs.write_text(json.dumps([{"spec": replica_spec(dataset, 10 * GIB, replicas=3)}]))
    driver = popen([sys.executable, str(HERE / "sched_driver.py"), "serve", str(specs)],
                   stdout=subprocess.PIPE, env={**os.environ, "SCHED_DRIVER_HOLD": "60"})
    assert driver.stdout is not None
    (run_id,) = json.loads(driver.stdout.readline())
    outputs = Path(os.environ["EVALTUI_OUTPUTS"])
    rec = wait_until(lambda: (r := record(outputs, run_id)).get("pid") and r, what="spawn")
    os.killpg(driver.pid, 9)
    driver.wait()
    run_ref = PidRef(rec["pid"], rec["pid_create_time"])
    assert run_ref.alive()
    with Ledger().transaction():
        pass  # purges the dead scheduler's holds: only the run's own entries are left
    sched = make_scheduler()  # adopts the run
    assert entries_of(sched, run_id) == [(g, 10 * GIB) for g in (0, 1, 2)]
    # ... and admission sees them: a 16 GiB job fits only on GPU3.
    other, _ = sched.submit(line_spec(dataset, episodes=1, marginal_vram_mb=16 * GIB,
                                      sleep_sec=9))
    sched.tick()
    assert record(outputs, other).get("gpu") == 3
    os.killpg(run_ref.pid, 9)


def test_two_schedulers_with_runs_on_several_gpus_never_over_commit_any_gpu(
        popen: Callable[..., subprocess.Popen[bytes]], dataset: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    jobs = (30, 30)
    drivers = []
    for i, n in enumerate(jobs):
        env = dict(os.environ, EVALTUI_FAKE_GPUS="4x24576", EVALTUI_LEDGER_AUDIT=str(audit),
                   EVALTUI_OUTPUTS=str(tmp_path / f"outputs{i}"))
        drivers.append(popen([sys.executable, str(HERE / "sched_driver.py"), "spread", str(n),
                              str(i), str(dataset)], env=env, stdout=subprocess.PIPE))
    states: dict[str, str] = {}
    for proc in drivers:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        states.update({f"{proc.pid}/{k}": v for k, v in json.loads(out).items()})
    assert len(states) == sum(jobs) and set(states.values()) == {"done"}
    with Ledger(audit_path=audit).transaction():
        pass  # purges what the last runs left, into the log too

    held: dict[str, tuple[int, int]] = {}
    admitted_at: dict[tuple[int, str], set[float]] = {}
    peak_gpus = peak_mb = 0
    for line in audit.read_bytes().splitlines():
        op = orjson.loads(line)
        if op["op"] == "admit":
            assert op["key"] not in held
            held[op["key"]] = (op["gpu"], op["vram_mb"])
            if not op["run_id"].startswith("nodeset:"):
                # Two outputs roots may use one run id: keyed by scheduler too.
                run = (op["scheduler_pid"], op["run_id"])
                admitted_at.setdefault(run, set()).add(op["t"])
        else:
            held.pop(op["key"])
        per_gpu: dict[int, int] = {}
        for gpu, mb in held.values():
            per_gpu[gpu] = per_gpu.get(gpu, 0) + mb
        assert all(mb <= CAPACITY_MB for mb in per_gpu.values()), f"over-committed at {op}"
        peak_gpus = max(peak_gpus, len(per_gpu))
        peak_mb = max([peak_mb, *per_gpu.values()])
    assert held == {}
    assert peak_gpus == 4  # every GPU really was in use
    assert peak_mb > CAPACITY_MB * 3 // 4  # ... and contended
    # All or nothing: every GPU of a run is reserved in the same transaction.
    assert all(len(times) == 1 for times in admitted_at.values())
    spread_runs = 0
    for i in range(len(jobs)):
        for run_dir in runs_root(tmp_path / f"outputs{i}").iterdir():
            rec = json.loads((run_dir / "scheduler.json").read_text())
            spread_runs += len(rec.get("gpus", [])) > 1
    assert spread_runs > 5  # many runs really were on several GPUs


def test_ls_and_show_list_the_gpus_of_a_run_with_replicas(
        make_scheduler: Make, fake_gpus: Callable[[str], None], dataset: Path,
        tmp_path: Path) -> None:
    from rich.console import Console

    from evaltui.commands.runtables import print_run, runs_table

    fake_gpus("4x24576")
    sched = make_scheduler(spawner=holding_spawner(tmp_path / "release"))
    one, _ = sched.submit(line_spec(dataset, episodes=1, marginal_vram_mb=20 * GIB, sleep_sec=1))
    rep, _ = sched.submit(replica_spec(dataset, 12 * GIB, replicas=3, tag=2))
    sched.tick()
    console = Console(width=80, record=True, color_system=None)
    console.print(runs_table([sched.get_run(rep), sched.get_run(one)], width=80))
    table = console.export_text()
    assert "gpus" in table.splitlines()[0]
    row = next(line for line in table.splitlines() if line.startswith(rep))
    assert "1,2,3" in row
    assert "0" in next(line for line in table.splitlines() if line.startswith(one))
    console = Console(width=80, record=True, color_system=None)
    print_run(console, sched.get_run(rep))
    shown = console.export_text()
    assert "gpus: GPU1, GPU2, GPU3" in shown
    assert "reserved: 36.0 GiB" in shown  # 12 GiB on each of three GPUs
    # A listing without runs on several GPUs is as before: no gpus column.
    console = Console(width=80, record=True, color_system=None)
    console.print(runs_table([sched.get_run(one)], width=80))
    assert "gpus" not in console.export_text()


def test_a_fake_gpu_list_charges_its_first_gpu_unless_told(
        monkeypatch: Any, fake_gpus: Callable[[str], None]) -> None:
    from evaltui.gpu import fakegpu
    from evaltui.scheduler.admission.resources import FakeGpuProbe

    fake_gpus("4x24576")
    monkeypatch.setenv(fakegpu.FAKE_GPU_INDEX_ENV, "2,0,3")  # as a run with replicas gets
    try:
        fakegpu.charge(300)
        fakegpu.charge(200, gpu=3)
        used = [g.used_mb for g in FakeGpuProbe([24576] * 4).read().gpus]
        assert used == [0, 0, 300, 200]
    finally:
        fakegpu.release(gpu=2)
        fakegpu.release(gpu=3)


def test_a_hosted_nodeset_counts_whole_for_a_run_that_has_replicas_of_it(
        dataset: Path, tmp_path: Path) -> None:
    from evaltui.contract.records import SchedulerRecord
    from evaltui.contract.spec import parse_spec
    from evaltui.scheduler.admission.calibration import nodeset_parts
    from evaltui.scheduler.runs.jobs import Job
    from evaltui.scheduler.runs.spreading import hosted_for

    def job(spec: dict[str, Any]) -> Job:
        parsed = parse_spec(spec)
        return Job("r", tmp_path, SchedulerRecord(state=RunState.QUEUED), parsed,
                   nodeset_parts(parsed), 1)

    plain = line_spec(dataset, episodes=1, marginal_vram_mb=GIB, sleep_sec=7)
    plain["graph"]["nodesets"]["policy"]["parallelism"] = "shared"
    shared = job(plain)
    (policy,) = [p for p in shared.parts if p.name == "policy"]
    loaded = {policy.key, "other"}
    assert hosted_for(shared, loaded) == loaded  # it uses the scheduler's host
    # The same nodeset with replicas: its run hosts it per GPU, so it is not "loaded".
    assert hosted_for(job(replica_spec(dataset, GIB, tag=7)), loaded) == {"other"}


def test_a_ledger_that_cannot_be_stored_starts_no_replica_anywhere(
        make_scheduler: Make, fake_gpus: Callable[[str], None], small_disk, dataset: Path,
        tmp_path: Path) -> None:
    disk = small_disk("ledger", "512k")
    fake_gpus("4x24576")
    sched = make_scheduler(ledger=Ledger(disk.path),
                           spawner=holding_spawner(tmp_path / "release"))
    disk.fill()
    run_id, _ = sched.submit(replica_spec(dataset, 16 * GIB, tag=8))
    sched.tick()
    (waiting,) = sched.queue()
    assert waiting.waiting_kind == "ledger"
    assert record(sched.outputs, run_id).get("pid") is None  # nothing spawned
    assert not entries_of(sched, run_id)  # and no GPU held, none of the four
    disk.free()
    sched.tick()
    assert running(sched, run_id)
    assert entries_of(sched, run_id) == [(g, 16 * GIB) for g in range(4)]


def test_a_real_run_hosts_one_replica_on_each_gpu_the_scheduler_chose(
        make_scheduler: Make, fake_gpus: Callable[[str], None], dataset: Path) -> None:
    """Both halves together: with GPUs 0 and 2 of four busy (16 GiB used by another
    process), the scheduler reserves GPUs 1 and 3 for a ``per_gpu`` run of 12 GiB
    replicas; the run process it starts hosts one replica on each (summary.json
    ``replicas``), every episode is served, and its reservations end with it."""
    fake_gpus("4x24576")
    for gpu in (0, 2):
        fakegpu.charge(16 * GIB, gpu=gpu)  # this test process stands for another user
    try:
        sched = make_scheduler()
        run_id, _ = sched.submit(replica_spec(dataset, 12 * GIB))
        sched.start()
        assert sched.wait(run_id, timeout=60) is RunState.DONE
    finally:
        for gpu in (0, 2):
            fakegpu.release(gpu=gpu)
    rec = record(sched.outputs, run_id)
    assert sorted(rec["gpus"]) == ["GPU1", "GPU3"]
    summary = json.loads((runs_root(sched.outputs) / run_id / "summary.json").read_text())
    replicas = summary["replicas"]["policy"]
    assert sorted(r["gpu"] for r in replicas) == ["GPU1", "GPU3"]
    assert all(r["state"] == "up" for r in replicas)
    assert summary["counts_by_status"] == {"ok": summary["episodes_total"]} and sum(
        summary["counts_by_status"].values()) > 0
    assert sum(r["requests"] for r in replicas) > 0
    wait_until(lambda: all(e.run_id != run_id for e in sched.resources().ledger),
               what="the run's reservations released")


def test_a_lost_replica_gives_its_gpu_back_while_its_run_goes_on(
        make_scheduler: Make, fake_gpus: Callable[[str], None], tmp_path: Path) -> None:
    """SIGKILL one replica host of a run on four GPUs: the run goes on degraded on three,
    and the scheduler releases the lost GPU's reservation, so a 20 GiB run (which fits
    nowhere else) is admitted there while the first still runs."""
    fake_gpus("4x24576")
    long_line = write_dataset(tmp_path / "long.jsonl", [3] * 40)
    sched = make_scheduler()
    spec = replica_spec(long_line, 12 * GIB, tag=0.25)  # 120 steps of 0.25 s, 2 workers
    spec["eval"].update(worker_count=2, episode_count=40, max_episode_retries=1)
    first, _ = sched.submit(spec)
    sched.start()
    summary_path = runs_root(sched.outputs) / first / "summary.json"

    def replicas_up() -> list[dict[str, Any]] | None:
        try:
            hosts = json.loads(summary_path.read_text())["replicas"]["policy"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return hosts if len(hosts) == 4 and all(h["state"] == "up" for h in hosts) else None

    hosts = wait_until(replicas_up, timeout=60, what="four replicas up")
    victim = next(h for h in hosts if h["gpu"] != record(sched.outputs, first)["gpus"][0])
    gpu = int(victim["gpu"].removeprefix("GPU"))
    os.kill(victim["pid"], 9)
    wait_until(lambda: all(e.gpu != gpu or e.vram_mb == 0 for e in sched.resources().ledger
                           if e.run_id == first), timeout=30, what="the lost GPU released")
    assert sched.get_run(first).state is RunState.RUNNING  # released while it runs on
    second, _ = sched.submit(line_spec(long_line, episodes=1, marginal_vram_mb=20 * GIB))
    wait_until(lambda: record(sched.outputs, second).get("gpu") is not None, timeout=30,
               what="the 20 GiB run admitted")
    assert record(sched.outputs, second)["gpu"] == gpu
    assert sched.get_run(first).state is RunState.RUNNING  # the degraded run goes on
    assert gpu not in record(sched.outputs, first)["reservation"]["gpus"]
    assert sched.wait(first, timeout=120) is RunState.DONE
    assert sched.wait(second, timeout=60) is RunState.DONE
    done = json.loads(summary_path.read_text())
    assert done["counts_by_status"] == {"ok": 40}
    assert [h["state"] for h in done["replicas"]["policy"] if h["gpu"] == victim["gpu"]] == \
        ["lost"]
