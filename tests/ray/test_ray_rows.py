"""Ray executor on a two-node local cluster: the same rows as the local pool, actors on
both nodes, ep dirs complete on the driver though the nodes share no scratch dir."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import orjson
import pytest
from raycluster import RayCluster
from runhelpers import builtin_graph, comparable, episode_rows, run_to_end

from evaltui.rundir.framefile import FRAMES_FILENAME, read_frame
from evaltui.rundir.jsonfiles import read_json

EPISODES = 6


def spec(graph: str, *, executor: str, address: str | None = None, workers: int = 1,
         **params: object) -> dict:
    ev = {"dataset": "babyai", "split": "GoToLocal", "episode_count": EPISODES,
          "worker_count": workers, "executor": executor}
    if address:
        ev["ray_address"] = address
    # A slow simulator step, so that both actors are up before the episodes run out.
    params = {"env__sim_latency_ms": 25, **params}
    return {"graph": builtin_graph(graph, **params), "eval": ev}


def same(row: dict) -> dict:
    return {k: v for k, v in comparable(row).items() if k != "worker_count"}


def actor_nodes(run_dir: Path) -> dict[int, str]:
    """worker slot -> node id, from the run's log lines about its actors."""
    text = (run_dir / "run.log").read_text()
    return {int(w): node for w, node in
            re.findall(r"worker (\d+) is Ray actor pid \d+ on node \S+ \((\w+)\)", text)}


@pytest.mark.parametrize("graph", ["bot", "noisy_bot", "model"])
def test_ray_rows_equal_local_k1(graph: str, ray_cluster: RayCluster, tmp_path: Path) -> None:
    local = run_to_end(spec(graph, executor="local"), tmp_path / "local")
    remote = run_to_end(spec(graph, executor="ray", address=ray_cluster.address, workers=2),
                        tmp_path / "ray")
    assert read_json(remote / "summary.json")["status"] == "done", \
        (remote / "run.log").read_text()[-3000:]
    local_rows, ray_rows = episode_rows(local), episode_rows(remote)
    assert len(ray_rows) == EPISODES
    # worker_count is the run's K (2 here, 1 locally): a header field, not a result.
    assert [same(r) for r in ray_rows] == [same(r) for r in local_rows]
    assert {r["worker_id"] for r in ray_rows} <= {0, 1}
    nodes = actor_nodes(remote)
    assert len(set(nodes.values())) == 2, nodes  # SPREAD: one actor on each node
    summary_local = read_json(local / "summary.json")
    summary_ray = read_json(remote / "summary.json")
    assert summary_ray["metrics"] == summary_local["metrics"]
    for index in range(EPISODES):  # the driver's ep dirs hold the whole episode
        ep_l = local / "episodes" / f"ep{index:04d}"
        ep_r = remote / "episodes" / f"ep{index:04d}"
        assert read_json(ep_r / "trajectory.json") == read_json(ep_l / "trajectory.json")
        log_l = [orjson.loads(x) for x in (ep_l / "log.jsonl").read_bytes().splitlines()]
        log_r = [orjson.loads(x) for x in (ep_r / "log.jsonl").read_bytes().splitlines()]
        strip = ("t", "dur_ms")
        assert [{k: v for k, v in r.items() if k not in strip} for r in log_r] == \
               [{k: v for k, v in r.items() if k not in strip} for r in log_l]
        # Tile ids depend on what a worker drew before; the pictures must not.
        offsets = re.findall(rb'"\$frame":"frames.bin","at":(\d+)',
                             (ep_r / "log.jsonl").read_bytes())
        assert offsets
        for at in map(int, offsets):
            assert np.array_equal(read_frame(ep_r / FRAMES_FILENAME, at),
                                  read_frame(ep_l / FRAMES_FILENAME, at))


def test_nodes_keep_no_scratch_and_never_see_the_run_dir(ray_cluster: RayCluster,
                                                          tmp_path: Path) -> None:
    run_dir = run_to_end(spec("bot", executor="ray", address=ray_cluster.address, workers=2),
                         tmp_path)
    log = (run_dir / "run.log").read_text()
    scratches = re.findall(r"scratch (\S+)", log)
    assert len(scratches) == 2 and len(set(scratches)) == 2
    homes = set()
    for scratch in scratches:
        assert not Path(scratch).exists()  # removed when the actor closed
        assert str(run_dir) not in scratch
        homes |= {d for d in ray_cluster.node_dirs if Path(scratch).is_relative_to(d)}
    assert homes == set(ray_cluster.node_dirs)  # each node logs into its own temp dir
    assert all((run_dir / "episodes" / f"ep{i:04d}" / "log.jsonl").stat().st_size > 0
               for i in range(EPISODES))
