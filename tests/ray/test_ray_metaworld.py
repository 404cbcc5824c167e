"""Meta-World on the Ray executor (two-node local cluster): the same rows as the local
pool, and each episode's video comes back to the driver's ep dir."""

from __future__ import annotations

from pathlib import Path

import pytest
from raycluster import RayCluster
from runhelpers import builtin_graph, comparable, episode_rows, run_to_end

from evaltui.rundir.jsonfiles import read_json

pytest.importorskip("metaworld", reason="metaworld is not installed (evaltui[metaworld])")

EPISODES = 4


def spec(executor: str, address: str | None = None, workers: int = 1) -> dict:
    ev = {"dataset": "metaworld", "split": "MT10", "episode_count": EPISODES,
          "worker_count": workers, "executor": executor}
    if address:
        ev["ray_address"] = address
    return {"graph": builtin_graph("mw_expert", env__frames="end"), "eval": ev}


def test_ray_rows_and_videos_equal_the_local_pool(ray_cluster: RayCluster,
                                                  tmp_path: Path) -> None:
    local = run_to_end(spec("local"), tmp_path / "local", timeout=300)
    remote = run_to_end(spec("ray", ray_cluster.address, workers=2), tmp_path / "ray",
                        timeout=300)
    assert read_json(remote / "summary.json")["status"] == "done", \
        (remote / "run.log").read_text()[-3000:]

    def same(row: dict) -> dict:
        # attempts: on a loaded machine a raylet slow to answer is a lost node and its
        # episode runs again elsewhere (with the same result, which is what is compared).
        return {k: v for k, v in comparable(row).items()
                if k not in ("worker_count", "attempts")}

    assert [same(r) for r in episode_rows(remote)] == [same(r) for r in episode_rows(local)]
    for index in range(EPISODES):
        video = remote / "episodes" / f"ep{index:04d}" / "assets" / "video.mp4"
        assert video.is_file() and video.stat().st_size > 0, index
