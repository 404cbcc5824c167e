"""Issue 34: CPU cores are reserved in the machine-wide ledger like memory. Two scheduler
processes on one ledger, a machine of ``EVALTUI_CPUS=2`` and a GPU with room for all:
every job needs one core (one worker), so never more than two run at once, machine-wide.

Every admit and release is appended to the ledger's audit log under its lock; replaying
it must never show more than two cores reserved. As a cross-check, the wall-clock
intervals the fake runs lived never overlap more than two deep either.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from schedhelpers import HERE, wait_until

from evaltui.rundir.layout import runs_root
from evaltui.scheduler.admission.ledger import Ledger

JOBS = 8
CORES = 2


def test_two_schedulers_on_one_ledger_never_oversubscribe_the_cores(
        popen: Callable[..., subprocess.Popen[bytes]], dataset: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    drivers = []
    for i in range(2):
        env = dict(os.environ, EVALTUI_FAKE_GPUS="1x65536", EVALTUI_CPUS=str(CORES),
                   EVALTUI_LEDGER_AUDIT=str(audit), EVALTUI_OUTPUTS=str(tmp_path / f"out{i}"))
        drivers.append(popen([sys.executable, str(HERE / "sched_driver.py"), "fixed",
                              str(JOBS), "1024", "0.3", str(dataset)], env=env,
                             stdout=subprocess.PIPE))
    for proc in drivers:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        assert set(json.loads(out).values()) == {"done"}
    with Ledger(audit_path=audit).transaction():
        pass  # purges what the last runs left (their holders are dead), into the log too

    held: dict[str, float] = {}
    peak, admits = 0.0, 0
    for line in audit.read_bytes().splitlines():
        op = orjson.loads(line)
        if op["op"] == "admit":
            if op["run_id"].startswith("nodeset:"):
                continue
            held[op["key"]] = op["cpus"]
            admits += 1
        else:
            held.pop(op["key"], None)
        peak = max(peak, sum(held.values()))
        assert sum(held.values()) <= CORES, f"cores oversubscribed at {op}"
    assert admits == 2 * JOBS and held == {}
    assert peak == CORES  # the cores really were contended

    events: list[tuple[float, int]] = []
    for i in range(2):
        for run_dir in runs_root(tmp_path / f"out{i}").iterdir():
            events.append((float((run_dir / "started").read_text()), 1))
            events.append((float((run_dir / "ended").read_text()), -1))
    live = 0
    for _, delta in sorted(events):  # ends before starts on ties
        live += delta
        assert live <= CORES


def test_workers_auto_takes_the_cores_the_ledger_leaves_free(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import argparse

    from evaltui.commands.eval import add_spec_arguments
    from evaltui.commands.evalspec import spec_from_args
    from evaltui.contract.pidref import PidRef
    from evaltui.contract.views import LedgerEntry

    parser = argparse.ArgumentParser()
    add_spec_arguments(parser)
    monkeypatch.setenv("EVALTUI_CPUS", "6")

    def workers() -> int:
        args = parser.parse_args(["bot", "--workers", "auto", "--episodes", "5"])
        return spec_from_args(args)["eval"]["worker_count"]

    assert workers() == 6
    holder = PidRef.current()
    with Ledger().transaction() as txn:  # another run holding 4 cores, alive (this process)
        txn.add(LedgerEntry(run_id="20250101_000000", holder_pid=holder.pid,
                            holder_create_time=holder.create_time, scheduler_pid=os.getpid(),
                            outputs=str(tmp_path), gpu=None, vram_mb=0, ram_mb=0, cpus=4))
    assert workers() == 2
    monkeypatch.setenv("EVALTUI_CPUS", "3")
    assert workers() == 1  # never fewer than one
    with pytest.raises(SystemExit):
        parser.parse_args(["bot", "--workers", "many"])



def test_a_runs_cores_measured_else_declared_else_one_per_worker(tmp_path: Path) -> None:
    from evaltui.contract.spec import parse_spec
    from evaltui.graphs import builtin_graph_path
    from evaltui.scheduler.admission.calibration import Calibration, nodeset_parts

    graph = json.loads(builtin_graph_path("bot").read_text())
    spec = parse_spec({"graph": graph, "eval": {"worker_count": 4}})
    declared = parse_spec({"graph": graph, "eval": {"worker_count": 4},
                           "scheduling": {"cpus_per_worker": 0.5, "host_mem_mb": 3000}})
    cal = Calibration(tmp_path)
    assert cal.estimate(spec, nodeset_parts(spec)).cpus == 4.0  # 1 per worker
    est = cal.estimate(declared, nodeset_parts(declared))
    assert est.cpus == 2.0 and est.ram_mb == 3000
    cal.record_cores(spec, 0.25)  # what a run of this graph was measured to use per worker
    assert cal.estimate(spec, nodeset_parts(spec)).cpus == 1.0
    assert cal.estimate(declared, nodeset_parts(declared)).cpus == 1.0  # measured wins


def test_a_finished_run_teaches_its_graphs_cpu_use(make_scheduler, dataset: Path) -> None:
    """The scheduler measures a run's process-tree CPU seconds while it runs; a sleep-bound
    graph learns well under a core per worker, and its next runs reserve that."""
    from schedhelpers import line_spec

    from evaltui.contract.spec import parse_spec
    from evaltui.contract.states import RunState
    from evaltui.scheduler.admission.calibration import Calibration, graph_key

    spec = line_spec(dataset, sleep_sec=0.15)  # ten episodes of 1-3 sleeping steps: ~3 s
    sched = make_scheduler().start()
    run_id, _ = sched.submit(spec)
    assert sched.wait(run_id, timeout=60) is RunState.DONE
    key = graph_key(parse_spec(spec))
    # Learnt just after the run's end is recorded (wait returns at the record).
    millicores = wait_until(lambda: Calibration().peak("cpu", key), timeout=10,
                            what="the run's CPU use in calibration.json")
    assert millicores is not None and millicores < 600, millicores
    parsed = parse_spec({**spec, "eval": {**spec["eval"], "worker_count": 4}})
    assert Calibration().estimate(parsed, []).cpus == pytest.approx(4 * millicores / 1000)
