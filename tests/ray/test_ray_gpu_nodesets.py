"""GPU nodesets on Ray: a shared nodeset that declares VRAM asks for a GPU and ``vram_mb``
of it, so it goes to the node that has them; asking more VRAM than any node has fails
the run within the placement timeout, naming what is missing.

A third node is added to the session cluster for this module: 1 (logical) GPU and
``vram_mb`` = :data:`NODE_VRAM_MB`, as ``ray start --num-gpus 1 --resources
'{"vram_mb": ...}'`` would declare it.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raycluster import OBJECT_STORE_BYTES, RayCluster
from runhelpers import builtin_graph, episode_rows, run_to_end

from evaltui.rundir.jsonfiles import read_json

NODE_VRAM_MB = 1000
PLACE_TIMEOUT_SEC = 3


@pytest.fixture(scope="module")
def gpu_node(ray_cluster: RayCluster) -> Iterator[Any]:
    cluster: Any = ray_cluster.cluster
    node = cluster.add_node(num_cpus=1, num_gpus=1, resources={"vram_mb": NODE_VRAM_MB},
                            object_store_memory=OBJECT_STORE_BYTES,
                            temp_dir=tempfile.mkdtemp(prefix="gpu-", dir=ray_cluster.temp_root))
    try:
        yield node
    finally:
        cluster.remove_node(node)


def model_spec(address: str, vram_mb: int) -> dict:
    return {"graph": builtin_graph("model"),
            "eval": {"dataset": "babyai", "split": "GoToLocal", "episode_count": 2,
                     "worker_count": 1, "executor": "ray", "ray_address": address},
            "scheduling": {"marginal_vram_mb": vram_mb}}


def test_a_vram_nodeset_runs_on_the_node_that_has_the_vram(
        ray_cluster: RayCluster, gpu_node: Any, tmp_path: Path) -> None:
    run_dir = run_to_end(model_spec(ray_cluster.address, 800), tmp_path, timeout=90)
    log = (run_dir / "run.log").read_text()
    assert read_json(run_dir / "summary.json")["status"] == "done", log[-3000:]
    host = re.search(r"shared nodeset policy is Ray actor pid \d+ on node (\w+), asking (.+)",
                     log)
    assert host, log[-3000:]
    assert host.group(1) == gpu_node.node_id[:8]
    assert "'GPU': 0.001" in host.group(2) and "'vram_mb': 800" in host.group(2)
    assert [r["status"] for r in episode_rows(run_dir)] == ["ok", "ok"]


def test_more_vram_than_any_node_has_fails_the_run_naming_it(
        ray_cluster: RayCluster, gpu_node: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_RAY_PLACE_TIMEOUT_SEC", str(PLACE_TIMEOUT_SEC))
    started = time.monotonic()
    run_dir = run_to_end(model_spec(ray_cluster.address, NODE_VRAM_MB + 500), tmp_path,
                         timeout=60)
    wall = time.monotonic() - started
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "failed"
    error = summary["error"]
    assert error.startswith("cannot place the host actor of shared nodeset 'policy' on the "
                            f"Ray cluster within {PLACE_TIMEOUT_SEC} s"), error
    assert f"missing resources: vram_mb {NODE_VRAM_MB + 500} (largest node has " \
           f"{float(NODE_VRAM_MB)}" in error, error
    assert not episode_rows(run_dir)
    assert wall < PLACE_TIMEOUT_SEC + 15, wall  # ray.init and the run process, not 60 s
