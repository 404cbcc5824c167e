"""Three scheduler processes race for one fake 24 GiB GPU with 200 random 2-16 GiB jobs.

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
from schedhelpers import HERE

from evaltui.rundir import read_json, runs_root
from evaltui.scheduler.ledger import Ledger

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
