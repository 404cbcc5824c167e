"""``WorkerZygote.start_by_fork``: the zygote as a fork of a process that has imported
what workers need (``evaltui eval``'s run process, after its spec check)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from runhelpers import ENGINE_TESTS

DRIVER = """
import json, os, signal, sys, threading, time
sys.path[:0] = [{engine_tests!r}]
import psutil
from pool_helpers import walk_graph, walk_spec
from runhelpers import wait_until
from evaltui.engine.graph.specchecks import check_spec
from evaltui.engine.executor.local.worker import WorkerConfig
from evaltui.engine.executor.local.zygote import WorkerZygote
from evaltui.contract.spec import parse_spec

tmp = {tmp!r}
checked = check_spec(parse_spec(walk_spec(__import__("pathlib").Path(tmp), [2], walk_graph())))
if {threaded!r}:
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
zygote = WorkerZygote(["faulty_nodesets"]).start_by_fork()
info = {{"me": psutil.Process().cmdline()}}

def worker_ready(tag):
    worker = zygote.fork(WorkerConfig(tmp, 0, checked, {{}}), name="worker0")
    info[tag + "_zygote"] = zygote.pid  # after the fork: a dead zygote is replaced there
    info[tag + "_cmdline"] = psutil.Process(zygote.pid).cmdline()
    info[tag + "_ready"] = worker.conn.poll(60) and worker.conn.recv()[0] == "ready"
    info[tag + "_worker_parent"] = psutil.Process(worker.pid).ppid()
    worker.end(grace_sec=1.0)

worker_ready("first")
if {kill!r}:
    os.kill(zygote.pid, signal.SIGKILL)
    wait_until(lambda: not zygote.alive(), what="the zygote's death")
    info["death"] = zygote.last_death
    worker_ready("second")
first = info["first_zygote"]
zygote.close()
info["first_left"] = psutil.pid_exists(first)
print(json.dumps(info))
"""


def drive(tmp_path: Path, *, threaded: bool = False, kill: bool = False) -> dict[str, Any]:
    code = DRIVER.format(engine_tests=str(ENGINE_TESTS), tmp=str(tmp_path), threaded=threaded,
                         kill=kill)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_zygote_is_a_fork_of_its_run_and_forks_the_workers(tmp_path: Path) -> None:
    info = drive(tmp_path)
    assert info["first_cmdline"] == info["me"]  # no exec: the same command line
    assert info["first_ready"]
    assert info["first_worker_parent"] == info["first_zygote"]
    assert not info["first_left"]  # close() ended and reaped it


def test_a_process_with_a_thread_starts_a_fresh_zygote_instead(tmp_path: Path) -> None:
    info = drive(tmp_path, threaded=True)
    assert "evaltui.engine.executor.local.zygoteproc" in info["first_cmdline"]
    assert info["first_ready"]


def test_a_killed_forked_zygote_is_replaced_by_a_fresh_one(tmp_path: Path) -> None:
    info = drive(tmp_path, kill=True)
    assert "signal 9" in info["death"]
    assert info["second_zygote"] != info["first_zygote"]
    assert "evaltui.engine.executor.local.zygoteproc" in info["second_cmdline"]
    assert info["second_ready"] and info["second_worker_parent"] == info["second_zygote"]
