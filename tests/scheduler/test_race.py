"""Three scheduler processes race for one fake 24 GiB GPU: 200 random 2-16 GiB jobs; then
exclusive jobs and ``evaltui run`` commands of random priorities.

Every admit, release and purge goes through the real ledger and is appended to the audit
log under the ledger's lock; replaying it must never show more than 24 GiB reserved. As a
cross-check, the wall-clock intervals the fake runs actually lived must never overlap for
more than 24 GiB of their reservations either.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
from ports import free_ports
from schedhelpers import HERE

from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.admission.ledger import Ledger
from evaltui.scheduler.lock import InteractiveLock

CAPACITY_MB = 24576
JOBS = (67, 67, 66)


def test_three_schedulers_never_overcommit_one_gpu(
        popen: Callable[..., subprocess.Popen[bytes]], dataset: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    drivers = []
    for i, n in enumerate(JOBS):
        env = dict(os.environ, EVALTUI_FAKE_GPUS=f"1x{CAPACITY_MB}",
                   EVALTUI_LEDGER_AUDIT=str(audit),
                   EVALTUI_OUTPUTS=str(tmp_path / f"outputs{i}"))
        drivers.append(popen([sys.executable, str(HERE / "sched_driver.py"), "race", str(n), str(i),
                              str(dataset)], env=env, stdout=subprocess.PIPE))
    states: dict[str, str] = {}
    for proc in drivers:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        states.update({f"{proc.pid}/{k}": v for k, v in json.loads(out).items()})
    assert len(states) == sum(JOBS) and set(states.values()) == {"done"}

    with Ledger(audit_path=audit).transaction():
        pass  # purges what the last runs left (their holders are dead), into the log too

    # 1. The audit log: reserved MiB after every operation, in lock order.
    held: dict[str, int] = {}
    peak = 0
    admits = 0
    for line in audit.read_bytes().splitlines():
        op = orjson.loads(line)
        if op["op"] == "admit":
            assert op["key"] not in held
            held[op["key"]] = op["vram_mb"]
            admits += 1
        else:
            held.pop(op["key"])
        peak = max(peak, sum(held.values()))
        assert sum(held.values()) <= CAPACITY_MB, f"over-committed at {op}"
    assert admits == sum(JOBS) and held == {}
    assert peak > CAPACITY_MB // 2  # the GPU really was contended

    # 2. What actually ran at the same time.
    events: list[tuple[float, int]] = []
    for i in range(len(JOBS)):
        for run_dir in runs_root(tmp_path / f"outputs{i}").iterdir():
            mb = read_json(run_dir / "scheduler.json")["reservation"]["mb"]
            events.append((float((run_dir / "started").read_text()), mb))
            events.append((float((run_dir / "ended").read_text()), -mb))
    live = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):  # ends before starts on ties
        live += delta
        assert live <= CAPACITY_MB


PROFILES = """\
hi: {exclusive_gpu: true, marginal_vram_mb: 4096, priority: 3}
mid: {exclusive_gpu: true, marginal_vram_mb: 4096, priority: 0}
lo: {exclusive_gpu: true, priority: -3}
"""


def test_three_backends_share_one_order_of_runs_and_wrapped_commands(
        popen: Callable[..., subprocess.Popen[bytes]], dataset: Path, tmp_path: Path) -> None:
    """Exclusive eval runs and ``evaltui run`` commands of three backends on one GPU: one
    at a time machine-wide, and each backend admits its runs and commands in one order."""
    audit = tmp_path / "audit.jsonl"
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(PROFILES)
    InteractiveLock().acquire("race", 120)  # everything queues before anything is admitted
    drivers = []
    for i, port in enumerate(free_ports(3)):
        env = dict(os.environ, EVALTUI_FAKE_GPUS=f"1x{CAPACITY_MB}",
                   EVALTUI_LEDGER_AUDIT=str(audit),
                   EVALTUI_OUTPUTS=str(tmp_path / f"outputs{i}"))
        drivers.append(popen([sys.executable, str(HERE / "sched_driver.py"), "mixed", "5",
                              str(i), str(dataset), str(port), str(profiles), "lo,hi,mid"],
                             env=env, stdout=subprocess.PIPE))
    queues = [json.loads(proc.stdout.readline()) for proc in drivers]  # type: ignore[union-attr]
    InteractiveLock().release()
    for queue in queues:
        assert {kind for _, kind, _ in queue} == {"run", "admit"} and len(queue) == 8
        priorities = [priority for _, _, priority in queue]
        assert priorities == sorted(priorities, reverse=True)  # one order for both kinds
    for proc in drivers:
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0
        assert set(json.loads(out).values()) == {"done", "0"}

    held: dict[str, tuple[int, bool]] = {}
    first_admit: dict[tuple[int, str], int] = {}  # run ids repeat across outputs roots
    for n, line in enumerate(audit.read_bytes().splitlines()):
        op = orjson.loads(line)
        if op["op"] == "admit":
            held[op["key"]] = (op["vram_mb"], op["exclusive"])
            # A bind re-adds an admit's reservation: its first admit is the admission.
            first_admit.setdefault((op["scheduler_pid"], op["run_id"]), n)
        else:
            held.pop(op["key"])
        assert sum(mb for mb, _ in held.values()) <= CAPACITY_MB, f"over-committed at {op}"
        assert len(held) <= 1, f"two exclusive holders at once at {op}"
    for proc, queue in zip(drivers, queues, strict=True):
        ids = [(proc.pid, run_id) for run_id, _, _ in queue]
        assert sorted(ids, key=first_admit.__getitem__) == ids  # admitted in queue order
