"""A nodeset in its own Python environment on the Ray executor: each node builds the
environment into its own cache (its raylet's EVALTUI_ENV_CACHE) and starts the env hosts
of its worker actors there; a shared nodeset in its own environment is hosted by its Ray
actor the same way. The session's two-node local cluster, whose nodes have caches of
their own."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from raycluster import RayCluster

FOREIGN_TESTS = Path(__file__).resolve().parents[1] / "engine" / "foreign"
sys.path.insert(0, str(FOREIGN_TESTS))
from ownenv_helpers import NUMPY1, cartpole_graph, eval_argv, eval_env, rows, run_dir_of  # noqa: E402

from evaltui.engine.foreign.envcache import MARKER  # noqa: E402

OWN = {"requirements": NUMPY1}


@pytest.fixture
def own_caches(ray_cluster: RayCluster) -> tuple[RayCluster, list[Path]]:
    """The session cluster and its nodes' own caches (tests/conftest.py: no cluster of
    this module's own to start)."""
    assert [c.name for c in ray_cluster.env_caches] == ["head", "node2"]
    return ray_cluster, ray_cluster.env_caches


def test_each_node_builds_the_environment_and_runs_its_hosts_there(
        own_caches: tuple[RayCluster, list[Path]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    cluster, caches = own_caches
    submit_cache = tmp_path / "submit-cache"  # where the spec is checked (the run process)
    monkeypatch.setenv("EVALTUI_ENV_CACHE", str(submit_cache))
    seen = tmp_path / "seen"
    seen.mkdir()
    graph = cartpole_graph(OWN, numpy_major=1, python_in=str(seen), policy="shared",
                           batched=True, policy_environment=OWN)
    graph["nodesets"]["policy"]["params"] = {"numpy_major": 1}
    work = tmp_path / "run"
    # The nodesets' module reaches the actors (and the hosts over there) as the workspace.
    argv = eval_argv(work, graph, "--workspace", str(FOREIGN_TESTS), episodes=4, eval_fields={
        "executor": "ray", "ray_address": cluster.address, "worker_count": 2})
    out = subprocess.run(argv, cwd=work, env={**eval_env(), **cluster.env()},
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = rows(run_dir_of(work))
    assert len(got) == 4 and all(r["status"] == "ok" for r in got), got
    (key,) = [m.parent.name for m in submit_cache.glob(f"*/{MARKER}")]
    built_on = [c for c in caches if (c / key / MARKER).exists()]
    assert built_on, "no node built the environment into its own cache"
    pythons = {p.read_text() for p in seen.glob("python.*")}
    assert pythons, "no env host ran"
    # Every env host ran in a node's own build of the environment, never the submit's.
    assert all(any(py.startswith(str(c / key)) for c in built_on) for py in pythons), pythons
    # Each node that ran a worker actor (its scratch dir is under the node's temp dir,
    # named as its cache is) built the environment and started its hosts from there.
    log = (run_dir_of(work) / "run.log").read_text()
    nodes = set(re.findall(r"worker \d+ is Ray actor pid \d+ on node .* scratch "
                           rf"{re.escape(str(cluster.temp_root))}/(\w+)/", log))
    assert nodes and nodes <= {c.name for c in caches}, log
    for name in nodes:
        cache = caches[[c.name for c in caches].index(name)]
        assert (cache / key / MARKER).exists()
        assert any(py.startswith(str(cache / key)) for py in pythons), (name, pythons)
