"""Policy-server benchmark (issue 31): 8 workers of a ``model_remote`` run against one
``evaltui serve-policy`` whose forward pass costs 10 ms + 1 ms per item.

Run: ``pytest -m bench -s tests/benchmarks/test_bench_policy_server.py``. Side by side
in one run: the server batching across connections (the default) vs answering one
request at a time (``--max-batch 1``: what openpi's own server does); and the client
nodeset's per-step cost on loopback vs calling the model in-process. Nothing here
asserts a time; the numbers are in docs/performance.md ("Policy servers").
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from evaltui.benchmarks.babyai import load_manifest
from evaltui.benchmarks.babyai.env import BabyAIEnv
from evaltui.benchmarks.babyai.model import BabyAIModelPolicy
from evaltui.engine.hosting.stacking import BatchOfOne
from evaltui.nodesets.openpi import WebsocketPolicy
from evaltui.procs.spawn import spawn_run
from evaltui.rundir.jsonfiles import read_json
from tests.runprep import prepare_run
from tests.waiting import wait_until

GRAPHS = Path(__file__).resolve().parents[2] / "evaltui" / "graphs"
EPISODES = int(os.environ.get("EVALTUI_BENCH_EPISODES", "192"))
"""GoToLocal episodes are ~10 steps: with a few per worker (48 measured first), the last
seconds ran with fewer than 8 workers asking, so batches shrank and the ratio with
them; 24 a worker keep the tail a small part of the episode phase."""
WORKERS = 8
CALLS = 2000


@contextmanager
def served(*args: str) -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-m", "evaltui.cli", "serve-policy",
                             "model:policy", "--port", "0", "--no-queue", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True).start()
    try:
        wait_until(lambda: lines, 60, "serve-policy")
        match = re.search(r":(\d+) \(", lines[0])
        assert match, lines
        yield int(match.group(1))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()


def episodes_per_sec(tmp_path: Path, name: str, port: int | None
                     ) -> tuple[float, dict[str, Any]]:
    """Episodes/s over the episode phase of a run against ``port`` (None: the ``model``
    graph, the same model hosted by the run itself, for reference)."""
    graph = json.loads((GRAPHS / ("model.json" if port is None else "model_remote.json"))
                       .read_text())
    graph["nodesets"]["env"]["params"]["frame_stride"] = 0
    if port is None:
        graph["nodesets"]["policy"]["params"].update(forward_latency_ms=10,
                                                     item_latency_ms=1)
    else:
        graph["nodesets"]["policy"]["params"]["url"] = f"ws://127.0.0.1:{port}"
    spec = {"graph": graph, "eval": {"split": "GoToLocal", "episode_count": EPISODES,
                                     "worker_count": WORKERS}}
    run_dir, _ = prepare_run(spec, tmp_path / name)
    proc = spawn_run(run_dir, dict(os.environ))
    assert proc.wait(timeout=900) == 0, (run_dir / "run.log").read_text()
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "done", summary.get("error")
    ends = [datetime.fromisoformat(r["finished_at"]).timestamp() for r in summary["episodes"]]
    starts = [end - r["elapsed_sec"] for end, r in zip(ends, summary["episodes"], strict=True)]
    if port is None:
        return EPISODES / (max(ends) - min(starts)), {}
    stats = httpx.get(f"http://127.0.0.1:{port}/stats").json()
    return EPISODES / (max(ends) - min(starts)), stats


@pytest.mark.bench
def test_batching_across_connections(tmp_path: Path) -> None:
    cost = ("--param", "forward_latency_ms=10", "--param", "item_latency_ms=1")
    with served(*cost) as port:
        batched, b_stats = episodes_per_sec(tmp_path, "batched", port)
    with served(*cost, "--max-batch", "1") as port:
        single, s_stats = episodes_per_sec(tmp_path, "single", port)
    hosted, _ = episodes_per_sec(tmp_path, "hosted", None)
    # The most the workers themselves allow here: a served model that costs nothing
    # (its forward neither sleeps nor waits). Batching cannot beat this bound.
    with served() as port:
        bound, _ = episodes_per_sec(tmp_path, "free", port)
    print(f"\n{WORKERS} workers, {EPISODES} GoToLocal episodes, forward 10 ms + 1 ms/item")
    print(f"  batched across connections: {batched:6.2f} episodes/s   mean batch "
          f"{b_stats['mean_batch_size']:.2f}  histogram {b_stats['batch_size_histogram']}")
    print(f"  one request at a time:      {single:6.2f} episodes/s   mean batch "
          f"{s_stats['mean_batch_size']:.2f}")
    print(f"  the run's own host (reference): {hosted:6.2f} episodes/s")
    print(f"  the workers' own bound (a model that costs nothing): {bound:6.2f} episodes/s")
    print(f"  ratio batched / one at a time: {batched / single:.2f}x; the bound / one at a "
          f"time: {bound / single:.2f}x")


def observations(n: int) -> list[dict[str, Any]]:
    env = BabyAIEnv(frame_stride=0)
    try:
        out = [env.set_episode(e)["obs"] for e in load_manifest("GoToLocal", limit=n)]
    finally:
        env.close()
    return out


def per_call_us(fn: Any, obs: list[dict[str, Any]]) -> float:
    for o in obs[:50]:
        fn(o)  # warm up
    t0 = time.perf_counter()
    for i in range(CALLS):
        fn(obs[i % len(obs)])
    return (time.perf_counter() - t0) / CALLS * 1e6


@pytest.mark.bench
def test_client_overhead_on_loopback() -> None:
    obs = observations(100)
    model = BatchOfOne(BabyAIModelPolicy())
    inproc = per_call_us(lambda o: model.call("act", {"obs": o}), obs)
    with served("--max-wait-ms", "0") as port:
        client = WebsocketPolicy(url=f"ws://127.0.0.1:{port}")
        try:
            remote = per_call_us(lambda o: client.act(o), obs)
        finally:
            client.close()
    assert np.isfinite(remote)
    print(f"\nper step, {CALLS} calls: in-process model {inproc:7.1f} us, through "
          f"serve-policy on loopback {remote:7.1f} us: overhead {remote - inproc:7.1f} us")


def requests_per_sec(port: int, obs: list[dict[str, Any]], clients: int = WORKERS,
                     each: int = 60) -> float:
    """``clients`` connections asking at once, no env between requests: the server's
    own rate, whatever the CPUs the workers' envs would take."""
    ready = threading.Barrier(clients + 1)

    def work() -> None:
        client = WebsocketPolicy(url=f"ws://127.0.0.1:{port}")
        try:
            ready.wait()
            for i in range(each):
                client.act(obs[i % len(obs)])
        finally:
            client.close()

    threads = [threading.Thread(target=work) for _ in range(clients)]
    for t in threads:
        t.start()
    ready.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return clients * each / (time.perf_counter() - t0)


@pytest.mark.bench
def test_requests_batched_across_connections() -> None:
    obs = observations(20)
    cost = ("--param", "forward_latency_ms=10", "--param", "item_latency_ms=1")
    with served(*cost) as port:
        batched = requests_per_sec(port, obs)
        b_stats = httpx.get(f"http://127.0.0.1:{port}/stats").json()
    with served(*cost, "--max-batch", "1") as port:
        single = requests_per_sec(port, obs)
    print(f"\n{WORKERS} connections asking at once, forward 10 ms + 1 ms/item: batched "
          f"{batched:6.1f} requests/s (mean batch {b_stats['mean_batch_size']:.2f}), one at "
          f"a time {single:6.1f} requests/s: {batched / single:.2f}x")
