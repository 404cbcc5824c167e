"""Replicas benchmark (issue 22): one split over 1, 2 and 4 replicas of the shipped model.

Run: ``pytest -m bench -s tests/benchmarks/test_bench_replicas.py``. The shipped model's
``forward_latency_ms`` stands for a big model's forward pass (a sleep per pass, whatever
the batch size); four fake GPUs (``EVALTUI_FAKE_GPUS=4x24576``) take the replicas. Each
replica count runs with both spreads (``slot``: worker i on replica i % R;
``least_loaded``: per request), and a run without the latency gives the limit the CPUs
set (frames off, one replica: the envs and the model's own work). Nothing here asserts a
time; the numbers are in docs/performance.md ("Replicas").
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from evaltui.procs.spawn import spawn_run
from evaltui.rundir.jsonfiles import read_json
from tests.runprep import prepare_run

GRAPHS = Path(__file__).resolve().parents[2] / "evaltui" / "graphs"
EPISODES = 48
WORKERS = 8
LATENCY_MS = 30.0
ITEM_BASE_MS = 10.0
ITEM_MS = 5.0


def model_graph(replicas: int | None, latency_ms: float, item_ms: float) -> dict[str, Any]:
    graph = json.loads((GRAPHS / "model.json").read_text())
    graph["nodesets"]["env"]["params"]["frame_stride"] = 0
    graph["nodesets"]["policy"]["params"].update(forward_latency_ms=latency_ms,
                                                 item_latency_ms=item_ms)
    if replicas is not None:
        graph["nodesets"]["policy"]["replicas"] = replicas
    return graph


def episodes_per_sec(tmp_path: Path, name: str, replicas: int | None, spread: str,
                     latency_ms: float = LATENCY_MS, item_ms: float = 0.0,
                     workers: int = WORKERS) -> tuple[float, float]:
    """Episodes a second over the episode phase (first start to last end) and over the
    run's own elapsed time (replica and worker start included)."""
    spec = {"graph": model_graph(replicas, latency_ms, item_ms),
            "eval": {"split": "GoToLocal", "episode_count": EPISODES, "worker_count": workers}}
    run_dir, _ = prepare_run(spec, tmp_path / name)
    env = {**os.environ, "EVALTUI_FAKE_GPUS": "4x24576", "CUDA_VISIBLE_DEVICES": "0,1,2,3",
           "EVALTUI_FAKE_GPU_INDEX": "0,1,2,3", "EVALTUI_REPLICA_SPREAD": spread}
    t0 = time.perf_counter()
    proc = spawn_run(run_dir, env)
    assert proc.wait(timeout=600) == 0, (run_dir / "run.log").read_text()
    wall = time.perf_counter() - t0
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "done", summary.get("error")
    if replicas:
        assert len(summary["replicas"]["policy"]) == replicas
    ends = [datetime.fromisoformat(r["finished_at"]).timestamp() for r in summary["episodes"]]
    starts = [end - r["elapsed_sec"] for end, r in zip(ends, summary["episodes"], strict=True)]
    return EPISODES / (max(ends) - min(starts)), EPISODES / min(wall, summary["elapsed_sec"])


def table(title: str, rates: dict[tuple[int, str], tuple[float, float]]) -> float:
    print(title)
    print("   R   slot            ratio   least_loaded    ratio   least/slot")
    base = rates[(1, "slot")][0]
    for r in (1, 2, 4):
        (slot, slot_run), (least, least_run) = rates[(r, "slot")], rates[(r, "least_loaded")]
        print(f"  {r:2d}   {slot:6.2f} ({slot_run:5.2f})  {slot / base:5.2f}   "
              f"{least:6.2f} ({least_run:5.2f})  {least / base:5.2f}   {least / slot:6.2f}")
    return base


@pytest.mark.bench
def test_replicas(tmp_path: Path) -> None:
    fixed = {(r, s): episodes_per_sec(tmp_path, f"f{r}-{s}", r, s)
             for r in (1, 2, 4) for s in ("slot", "least_loaded")}
    grows = {(r, s): episodes_per_sec(tmp_path, f"g{r}-{s}", r, s, latency_ms=ITEM_BASE_MS,
                                      item_ms=ITEM_MS)
             for r in (1, 2, 4) for s in ("slot", "least_loaded")}
    cpu = episodes_per_sec(tmp_path, "cpu", None, "slot", latency_ms=0.0)
    print(f"\nreplicas: {EPISODES} GoToLocal episodes of the shipped model, K={WORKERS} "
          f"workers, {os.cpu_count()} cores; episodes/s over the episode phase (over the "
          "run, replica start included, in brackets)")
    table(f"a fixed cost per pass: forward_latency_ms={LATENCY_MS:g}", fixed)
    base = table(f"a pass that grows with its batch: forward_latency_ms={ITEM_BASE_MS:g} + "
                 f"item_latency_ms={ITEM_MS:g} per request", grows)
    print(f"  CPU-bound limit (no forward latency, one replica): {cpu[0]:.2f} ep/s "
          f"({cpu[1]:.2f}) = {cpu[0] / base:.2f} x R=1 of the growing pass")
