"""Fixtures of the own-environment tests: a cache of built environments for the session,
and graphs whose env (and policy) may run in another Python environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
NUMPY1 = ["numpy<2", "gymnasium==1.0.0"]
"""A second environment whose numpy clashes with evaltui's (2.x)."""


@pytest.fixture(scope="session")
def env_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """EVALTUI_ENV_CACHE for the session (the tests' subprocesses inherit it)."""
    path = tmp_path_factory.mktemp("envcache")
    before = os.environ.get("EVALTUI_ENV_CACHE")
    os.environ["EVALTUI_ENV_CACHE"] = str(path)
    yield path
    if before is None:
        os.environ.pop("EVALTUI_ENV_CACHE", None)
    else:
        os.environ["EVALTUI_ENV_CACHE"] = before


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


def evaltui_eval(workdir: Path, graph: dict[str, Any], *args: str, episodes: int = 6,
                 timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``evaltui eval GRAPH`` from ``workdir`` (the test's nodesets on PYTHONPATH)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "graph.json").write_text(json.dumps(graph))
    write_dataset(workdir / "eps.jsonl", episodes)
    env = {**os.environ, "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "evaltui.cli", "eval", "graph.json",
                           "--dataset", "eps.jsonl", "--outputs", str(workdir / "out"), *args],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)


def run_dir_of(workdir: Path) -> Path:
    (found,) = (workdir / "out" / "eval_runs").iterdir()
    return found


_VOLATILE = {"elapsed_sec", "finished_at", "run_id", "worker_id", "dataset", "worker_count",
             "attempts"}


def rows(run_dir: Path) -> list[dict[str, Any]]:
    """Each episode's row and trajectory, without what differs between two equal runs."""
    out = []
    for ep in sorted((run_dir / "episodes").glob("ep*")):
        row = json.loads((ep / "episode.json").read_text())
        out.append({**{k: v for k, v in row.items() if k not in _VOLATILE},
                    "trajectory": json.loads((ep / "trajectory.json").read_text())})
    return out
