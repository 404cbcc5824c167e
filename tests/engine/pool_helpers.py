"""Specs and process lookups shared by the worker-pool tests (real run subprocesses)."""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
from faulty_nodesets import write_dataset
from runhelpers import ENGINE_TESTS, episode_rows, running, wait_until


def walk_graph(env: dict[str, Any] | None = None, *, shared_policy: bool = False,
               policy: dict[str, Any] | None = None) -> dict[str, Any]:
    """WalkEnv with StepPolicy inline, or BatchedStepPolicy shared (hosted by the run)."""
    return {
        "name": "walk",
        "nodesets": {
            "env": {"impl": "faulty_nodesets:WalkEnv", "parallelism": "replicated",
                    "params": env or {}},
            "policy": {"impl": "faulty_nodesets:BatchedStepPolicy" if shared_policy
                       else "faulty_nodesets:StepPolicy",
                       "parallelism": "shared" if shared_policy else "inline",
                       "params": policy or {}},
        },
        "nodes": {"policy": {"nodeset": "policy", "op": "act"},
                  "env_step": {"nodeset": "env", "op": "step"}},
        "edges": [["@obs", "policy.obs"], ["policy.action", "env_step.action"]],
        "loop": {"env": "env", "step": "env_step"},
    }


def traced_walk_graph(tmp_path: Path, *, shared_policy: bool = False,
                      **env: Any) -> tuple[Path, dict[str, Any]]:
    """A fresh trace dir and a walk graph whose WalkEnv (params ``env``) records into it."""
    trace = tmp_path / "trace"
    trace.mkdir()
    return trace, walk_graph({"trace_dir": str(trace), **env}, shared_policy=shared_policy)


def walk_spec(tmp_path: Path, lengths: list[int], graph: dict[str, Any],
              **eval_fields: Any) -> dict[str, Any]:
    dataset = write_dataset(tmp_path / "walk.jsonl", lengths)
    return {"graph": graph, "active_workspace_dir": str(ENGINE_TESTS),
            "eval": {"dataset": str(dataset), **eval_fields}}


def starts(trace_dir: Path) -> Counter[str]:
    """How many times each episode id was started (set_episode), over all processes."""
    return Counter(p.name.split(".")[1] for p in trace_dir.glob("start.*"))


def start_pids(trace_dir: Path, episode_id: str) -> list[int]:
    found = sorted(trace_dir.glob(f"start.{episode_id}.*"), key=lambda p: int(p.name.split(".")[3]))
    return [int(p.name.split(".")[2]) for p in found]


def hung_worker(trace_dir: Path, episode_id: str) -> int:
    """The PID of the worker hanging in ``episode_id`` (WalkEnv's ``hang_once``), once it
    hangs."""
    marker = trace_dir / f"hang.{episode_id}"
    wait_until(lambda: marker.exists() and marker.read_text(),
               what=f"{episode_id} to hang")
    return int(marker.read_text())


def engine_children(pid: int) -> list[psutil.Process]:
    """The run's zygote, worker and host subprocesses (workers are forks of the zygote,
    the zygote a fresh interpreter or a fork of the run: same command line as the run)."""
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for kid in kids:
        try:
            cmd = " ".join(kid.cmdline())
        except psutil.Error:
            continue
        if any(m in cmd for m in ("evaltui.engine.executor.local.zygoteproc",
                                  "evaltui.engine.hosting.hostprocess",
                                  "evaltui.engine.main")):
            out.append(kid)
    return out


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    living = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                living.append(proc)
        except psutil.NoSuchProcess:
            continue
    return living


def kill_the_hung_worker(spec: dict[str, Any], outputs: Path, trace_dir: Path, episode_id: str,
                         timeout: float = 60) -> tuple[Path, int, dict[int, dict[str, Any]]]:
    """Run ``spec``, SIGKILL the worker once it hangs in ``episode_id`` (``hang_once``) and
    check the run still exits 0; its run dir, the killed PID and its episode rows by index."""
    with running(spec, outputs) as (run_dir, proc):
        victim = hung_worker(trace_dir, episode_id)
        os.kill(victim, signal.SIGKILL)
        assert proc.wait(timeout=timeout) == 0
    return run_dir, victim, {r["episode_index"]: r for r in episode_rows(run_dir)}
