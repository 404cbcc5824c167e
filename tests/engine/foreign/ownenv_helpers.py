"""Helpers of the own-environment tests: graphs whose env (and policy) may run in another
Python environment, ``evaltui eval`` of them, and their rows."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
NUMPY1 = ["numpy<2", "gymnasium==1.0.0"]
"""A second environment whose numpy clashes with evaltui's (2.x)."""


def cartpole_graph(env_environment: dict[str, Any] | None = None, *,
                   policy: str = "inline", policy_environment: dict[str, Any] | None = None,
                   batched: bool = False, **env_params: Any) -> dict[str, Any]:
    env: dict[str, Any] = {"impl": "own_env_nodesets:NumpyCartPole",
                           "parallelism": "replicated", "params": {"max_steps": 30, **env_params}}
    if env_environment is not None:
        env["environment"] = env_environment
    pol: dict[str, Any] = {"impl": "own_env_nodesets:" + ("BatchedBalancePolicy" if batched
                                                         else "BalancePolicy"),
                           "parallelism": policy, "params": {}}
    if policy_environment is not None:
        pol["environment"] = policy_environment
    return {"name": "cartpole", "nodesets": {"env": env, "policy": pol},
            "nodes": {"policy": {"nodeset": "policy", "op": "act"},
                      "env_step": {"nodeset": "env", "op": "step"}},
            "edges": [["@obs", "policy.obs"], ["policy.action", "env_step.action"]],
            "loop": {"env": "env", "step": "env_step"}}


def write_dataset(path: Path, count: int) -> Path:
    with open(path, "w") as fh:
        for i in range(count):
            fh.write(json.dumps({"episode_id": f"cp-{i}", "scene_id": f"s{i % 2}", "seed": i,
                                 "limit": 30}) + "\n")
    return path


def eval_argv(workdir: Path, graph: dict[str, Any], *args: str, episodes: int = 6,
              eval_fields: dict[str, Any] | None = None) -> list[str]:
    """The ``evaltui eval`` command line of a graph (a JobSpec file with ``eval_fields``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    dataset = write_dataset(workdir / "eps.jsonl", episodes)
    if eval_fields is None:
        (workdir / "graph.json").write_text(json.dumps(graph))
        target = ["graph.json", "--dataset", "eps.jsonl"]
    else:
        (workdir / "spec.json").write_text(json.dumps(
            {"graph": graph, "eval": {"dataset": str(dataset), **eval_fields}}))
        target = ["spec.json"]
    return [sys.executable, "-m", "evaltui.cli", "eval", *target,
            "--outputs", str(workdir / "out"), *args]


def eval_env() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "200",
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}


def evaltui_eval(workdir: Path, graph: dict[str, Any], *args: str, episodes: int = 6,
                 eval_fields: dict[str, Any] | None = None, timeout: float = 240
                 ) -> subprocess.CompletedProcess[str]:
    """``evaltui eval`` of ``graph`` from ``workdir`` (the test's nodesets on PYTHONPATH)."""
    argv = eval_argv(workdir, graph, *args, episodes=episodes, eval_fields=eval_fields)
    return subprocess.run(argv, cwd=workdir, env=eval_env(), capture_output=True, text=True,
                          timeout=timeout)


def run_dir_of(workdir: Path) -> Path:
    (found,) = (workdir / "out" / "eval_runs").iterdir()
    return found


_VOLATILE = {"elapsed_sec", "finished_at", "run_id", "worker_id", "dataset", "worker_count",
             "attempts"}


def rows(run_dir: Path) -> list[dict[str, Any]]:
    """Each episode's row, trajectory, frames (PNG digests) and log, without what differs
    between two equal runs (times, worker ids)."""
    out = []
    for ep in sorted((run_dir / "episodes").glob("ep*")):
        if not (ep / "episode.json").exists():
            continue  # dealt, never run (a cancel)
        row = json.loads((ep / "episode.json").read_text())
        assets = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                  for p in sorted((ep / "assets").glob("*"))}
        out.append({**{k: v for k, v in row.items() if k not in _VOLATILE},
                    "trajectory": json.loads((ep / "trajectory.json").read_text()),
                    "assets": assets, "log": _log(ep / "log.jsonl")})
    return out


def _log(path: Path) -> list[dict[str, Any]]:
    """An episode's log records without their times (everything a node saw and said)."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{k: v for k, v in r.items() if k not in ("t", "dur_ms")} for r in records]


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``procs`` still running (a zombie is not)."""
    living = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                living.append(proc)
        except psutil.NoSuchProcess:
            continue
    return living
