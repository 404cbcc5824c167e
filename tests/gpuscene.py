"""Real processes holding fake GPU memory, owned as a user would see them: a run whose
env worker (a child of the run process) holds memory, a shared nodeset host, and a
process evaltui knows nothing of. For the GPU process view (evaltui gpus, the TUI).

Needs ``EVALTUI_FAKE_GPUS=2x24576`` and an isolated state dir in the environment, which
the processes inherit; every process runs in its own session and is ended by group.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import psutil
from proctools import end_session

from evaltui.contract.pidref import PidRef
from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.rundir.layout import runs_root

WORKER = textwrap.dedent("""
    import sys, time
    from evaltui.gpu import fakegpu
    fakegpu.charge(int(sys.argv[1]), gpu=int(sys.argv[2]))
    print("charged", flush=True)
    time.sleep(600)
""")
"""Holds MiB on a fake GPU until killed (``MB GPU``)."""
RUN = f"WORKER = {WORKER!r}\n" + textwrap.dedent("""
    import subprocess, sys
    worker = subprocess.Popen([sys.executable, "-c", WORKER, *sys.argv[3:]],
                              stdout=subprocess.PIPE)
    assert worker.stdout.readline() == b"charged\\n"
""") + WORKER
"""A run process (``MB GPU WORKER_MB WORKER_GPU``): its child holds memory too."""

RUN_ID = "20260115_093000"
HOST_NODESET = "policy"


@dataclass
class GpuScene:
    """Who is who: the run process, its worker, the host and the stranger."""

    run_dir: Path
    run: PidRef
    worker: int
    host: PidRef
    stranger: int
    procs: list[subprocess.Popen[bytes]]

    def close(self) -> None:
        _end(self.procs)


def _end(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        end_session(proc)
        if proc.stdout is not None:
            proc.stdout.close()


def _start(code: str, *args: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == b"charged\n"
    return proc


def build_scene(outputs: Path, state: Path) -> GpuScene:
    """Run RUN_ID (1000 MiB on GPU1, its worker 4000 on GPU0), the shared ``policy`` host
    (2000 on GPU0, held by RUN_ID), and a stranger (500 on GPU0)."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        run = _start(RUN, "1000", "1", "4000", "0")
        procs.append(run)
        host = _start(WORKER, "2000", "0")
        procs.append(host)
        stranger = _start(WORKER, "500", "0")
        procs.append(stranger)
        run_ref, host_ref = PidRef.of(run.pid), PidRef.of(host.pid)
        worker = next(c.pid for c in psutil.Process(run.pid).children())
        run_dir = runs_root(outputs) / RUN_ID
        run_dir.mkdir(parents=True)
        write_json_atomic(run_dir / "scheduler.json", {
            "state": "running", "priority": 0, "queued_at": None, "admitted_at": None,
            "pid": run_ref.pid, "pid_create_time": run_ref.create_time,
            "reservation": {"gpu": 0, "mb": 4000, "ram_mb": 0}})
        hosts = state / "shared" / "hosts"
        hosts.mkdir(parents=True)
        write_json_atomic(hosts / f"{host.pid}.json", {
            "name": HOST_NODESET, "pid": host_ref.pid, "pid_create_time": host_ref.create_time,
            "holders": [RUN_ID], "gpu": 0, "origin": "scheduler"})
        return GpuScene(run_dir, run_ref, worker, host_ref, stranger.pid, procs)
    except BaseException:
        _end(procs)
        raise
