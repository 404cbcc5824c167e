"""Cluster admission benchmarks (issue 12); numbers go to docs/performance.md ("Cluster
admission"). Run: ``pytest -m bench -s tests/benchmarks/test_bench_cluster.py``.

On the two-node local cluster of the ray tests (tests/ray/raycluster.py), each node with
4 fake 24 GiB GPUs declared in its raylet's environment (``EVALTUI_FAKE_GPUS=4x24576``):

1. ``tick()`` of a real JobScheduler on a real ClusterProbe with 1,000 queued jobs (target:
   median <= 10 ms): all waiting behind 8 running 20 GiB jobs, and a mixed queue whose
   runs (``sleep`` processes) end and are replaced as the test goes. The probe's Ray round
   trips (node read, ledger sync, ledger reserve) and the spawns are timed apart, and
   ``admission.decide`` and ``queue_order`` alone on the same queue (clusterbench.py).
2. submit -> the first record of the first episode's log.jsonl (its ``t``) of a BabyAI
   bot run with ``executor: ray``, placed on a node's GPU by the scheduler (loop started,
   default spawner), idle cluster; with the moments seen on the way, the same with
   ``executor: local`` for comparison, and reference costs measured apart (``ray.init``
   in a fresh interpreter, an actor's start on that node, the bot's imports in it).

Nothing here asserts a time.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from clusterbench import (
    decision_ms,
    line,
    new_scheduler,
    pct,
    report,
    round_trips_ms,
    timed_ticks,
)

from evaltui.contract.states import RunState
from evaltui.rundir.jsonfiles import read_json
from evaltui.scheduler.cluster.probe import ClusterProbe
from evaltui.scheduler.scheduler import JobScheduler, default_spawner

TESTS = Path(__file__).resolve().parents[1]
for folder in (TESTS / "ray", TESTS / "scheduler"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from schedhelpers import line_spec, write_dataset  # noqa: E402

GRAPHS = TESTS.parent / "evaltui" / "graphs"
GPU_MB = 24576

pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'evaltui[ray]')")
    from raycluster import two_node_cluster

    root = tmp_path_factory.mktemp("nodes")
    envs = [{"EVALTUI_FAKE_GPUS": f"4x{GPU_MB}", "EVALTUI_NODE_NAME": name,
             "EVALTUI_STATE_DIR": str(root / name)} for name in ("node-a", "node-b")]
    with two_node_cluster(envs) as c:
        yield c


# ---- 1. the admission tick with 1,000 queued --------------------------------------------------

def test_tick_with_1000_queued_all_waiting(cluster: Any, tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "line.jsonl", [1, 2, 3])
    sched, probe, holders = new_scheduler(tmp_path / "outputs", cluster.address)
    try:
        for i in range(8):  # one per GPU (20 GiB: a second never fits beside it)
            sched.submit(line_spec(dataset, episodes=1, marginal_vram_mb=20480, sleep_sec=i))
        sched.tick()
        assert len(holders.procs) == 8
        nodes = Counter(read_json(j.run_dir / "scheduler.json").get("node")
                        for j in sched._core.running.values())
        rng = random.Random(0)
        for i in range(1000):  # as test_bench_scheduler.py's queue
            sched.submit(line_spec(dataset, episodes=1, priority=rng.randint(-2, 2),
                                   marginal_vram_mb=rng.randint(10240, 20480),
                                   exclusive=i % 50 == 0, sleep_sec=100 + i))
        sched.tick()
        assert len(holders.procs) == 8 and len(sched.queue()) == 1000
        timings = {}
        for label, interval in (("a fresh probe read every tick (serve)", 0.0),
                                ("probe reading reused (< 1 s old)", 1.0)):
            sched._core.probe_interval = interval  # JobScheduler has no setter for it
            timings[label] = timed_ticks(sched, probe, holders, 30, pause=0.02)
        alone = decision_ms(sched)
        alone.update(round_trips_ms(probe))
        queue = sched.queue()
        kinds = Counter(q.waiting_kind for q in queue)
        sample = next(q.waiting_reason for q in queue if q.waiting_kind == "no_node")
    finally:
        holders.kill_all()
        sched.stop()
    print(f"\n8 running 20 GiB jobs on {dict(nodes)}; 1,000 queued (10-20 GiB), none fits")
    for label, ticks in timings.items():
        assert all(t["admitted"] == 0 for t in ticks)
        report(f"tick(), {label}", ticks)
    for label, values in alone.items():
        print(line(label, values))
    print(f"  waiting kinds: {dict(kinds)}; e.g. {sample!r}")


def test_tick_with_1000_queued_mixed(cluster: Any, tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "line.jsonl", [1, 2, 3])
    sched, probe, holders = new_scheduler(tmp_path / "outputs", cluster.address)
    rng = random.Random(1)
    try:
        probe.read()  # the NodeProbe actors start (~1 s, once per scheduler)
        for i in range(1000):
            run_id, _ = sched.submit(line_spec(
                dataset, episodes=1, priority=rng.randint(-2, 2),
                marginal_vram_mb=rng.randint(2048, 12288), exclusive=i % 100 == 0,
                sleep_sec=100 + i))
            # A cluster reservation outlives its run's end by up to 3 s (the ledger's
            # grace for spawns in flight, counted from the admission): holds of 1-4 s
            # keep admissions coming during the 50 ticks.
            holders.holds[run_id] = round(rng.uniform(1.0, 4.0), 2)
        first = timed_ticks(sched, probe, holders, 1)[0]
        ticks = timed_ticks(sched, probe, holders, 50, pause=0.2)
        alone = decision_ms(sched)
        left = len(sched.queue())
    finally:
        holders.kill_all()
        sched.stop()
    print(f"\nmixed: 1,000 queued (2-12 GiB, every 100th exclusive), runs hold 1-4 s, a tick "
          f"every ~0.2 s; first tick admitted {first['admitted']} in {first['tick']:.1f} ms "
          f"(reserve {first.get('ledger reserve', 0):.1f}, spawn {first.get('spawn', 0):.1f}); "
          f"{len(holders.procs)} admitted in all, {left} still queued")
    idle = [t for t in ticks if not t["admitted"]]
    busy = [t for t in ticks if t["admitted"]]
    if idle:
        report("ticks that admitted nothing (ended runs reaped, the rest wait)", idle)
    if busy:
        report(f"ticks that admitted (mean {statistics.mean(t['admitted'] for t in busy):.1f}"
               f" runs each)", busy)
        print(line("  tick wall per admitted run", [t["tick"] / t["admitted"] for t in busy]))
    print("on the queue left:")
    for label, values in alone.items():
        print(line(label, values))


# ---- 2. submit -> first episode running on a node ---------------------------------------------

def bot_spec(executor: str) -> dict[str, Any]:
    graph = json.loads((GRAPHS / "bot.json").read_text())
    return {"graph": graph,
            "eval": {"dataset": "babyai", "split": "GoToLocal", "episode_count": 1,
                     "worker_count": 1, "executor": executor},
            "scheduling": {"marginal_vram_mb": 1024}}


def log_records(log: Path) -> list[dict[str, Any]]:
    try:
        text = log.read_text()
    except FileNotFoundError:
        return []
    return [json.loads(x) for x in text.splitlines()[:-1] if x]  # the last may be partial


def follow(sched: JobScheduler, spec: dict[str, Any], spawned: dict[str, float]
           ) -> dict[str, Any]:
    """Submit ``spec`` on the idle cluster; seconds from the submit to each moment seen."""
    t0 = time.time()
    run_id, _ = sched.submit(spec)
    run_dir = sched.runs_root / run_id
    log = run_dir / "episodes" / "ep0000" / "log.jsonl"
    actor_seen = None
    deadline = time.monotonic() + 120
    records: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not any(r.get("node") for r in records):
        if actor_seen is None and (run_dir / "run.log").exists() and \
                "worker 0 is Ray actor" in (run_dir / "run.log").read_text():
            actor_seen = time.time()
        records = log_records(log)
        time.sleep(0.002)
    assert records, (run_dir / "run.log").read_text()[-2000:]
    state = sched.wait(run_id, timeout=120)
    assert state is RunState.DONE, (run_dir / "run.log").read_text()[-2000:]
    record = read_json(run_dir / "scheduler.json")
    step = next(r for r in records if r.get("node"))
    return {"spawn": spawned[run_id] - t0,
            "actor line in run.log": (actor_seen or float("nan")) - t0,
            "first record": records[0]["t"] - t0, "first step": step["t"] - t0,
            "node": f"{record.get('node')} GPU{record.get('gpu')}"}


INIT = """
import sys, time
t0 = time.perf_counter(); import ray; t1 = time.perf_counter()
ray.init(address=sys.argv[1], log_to_driver=False, logging_level=30); t2 = time.perf_counter()
ray.shutdown(); print(t1 - t0, t2 - t1, time.perf_counter() - t2)
"""


def reference_costs(cluster: Any, node_id: str, n: int = 4) -> dict[str, list[float]]:
    """Seconds, measured apart: a fresh interpreter's ``import ray``, ``ray.init`` and
    ``ray.shutdown``; an actor's start on ``node_id`` (1 CPU, as a worker slot) and the
    bot's imports inside it. This process is connected already (the ClusterProbe's)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    class Bare:  # defined here: shipped to the node by value
        def ping(self) -> int:
            return os.getpid()

        def import_bot(self) -> float:
            t = time.perf_counter()
            import evaltui.benchmarks.babyai.bot  # noqa: F401
            import evaltui.benchmarks.babyai.env  # noqa: F401
            return time.perf_counter() - t

    out: dict[str, list[float]] = {}
    env = {**os.environ, **cluster.env()}
    for _ in range(n):
        proc = subprocess.run([sys.executable, "-c", INIT, cluster.address], env=env,
                              capture_output=True, text=True, timeout=120, check=True)
        for key, value in zip(("import ray", "ray.init", "ray.shutdown"),
                              proc.stdout.split(), strict=True):
            out.setdefault(key, []).append(float(value))
        t = time.perf_counter()
        actor = ray.remote(Bare).options(num_cpus=1, scheduling_strategy=(
            NodeAffinitySchedulingStrategy(node_id, soft=False))).remote()
        ray.get(actor.ping.remote(), timeout=60)
        out.setdefault("actor start (bare)", []).append(time.perf_counter() - t)
        out.setdefault("bot imports in the actor", []).append(
            ray.get(actor.import_bot.remote(), timeout=60))
        ray.kill(actor, no_restart=True)
        time.sleep(0.5)  # its worker process exits before the next one starts
    return out


def test_submit_to_first_episode_on_a_node(cluster: Any, tmp_path: Path) -> None:
    spawned: dict[str, float] = {}
    node_ids: set[str] = set()

    def spawn(run_dir: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        spawned[run_dir.name] = time.time()
        node_ids.add(env.get("EVALTUI_RAY_NODE_ID", ""))
        return default_spawner(run_dir, env)

    probe = ClusterProbe(cluster.address)
    sched = JobScheduler(tmp_path / "outputs", gpu_probe=probe, spawner=spawn).start()
    try:
        cold = follow(sched, bot_spec("ray"), spawned)
        ray_runs, local_runs = [], []
        for i in range(8):
            ray_runs.append(follow(sched, bot_spec("ray"), spawned))
            if i % 2:
                local_runs.append(follow(sched, bot_spec("local"), spawned))
        assert len(node_ids) == 1 and "" not in node_ids  # every run pinned to one node
        refs = reference_costs(cluster, next(iter(node_ids)))
    finally:
        sched.stop()
    print("\nsubmit -> first episode (BabyAI bot, GoToLocal, 1 episode, K=1), idle cluster, "
          "seconds from submit:")
    for label, runs in ((f"executor ray, {len(ray_runs)} runs", ray_runs),
                        (f"executor local, {len(local_runs)} runs", local_runs)):
        print(f"  {label}:")
        for key in ("spawn", "actor line in run.log", "first record", "first step"):
            values = [r[key] for r in runs]
            if all(v == v for v in values):  # NaN: no actor line (local)
                warm = f"   (first run: {cold[key]:.3f})" if runs is ray_runs else ""
                print(f"    {key:22s} p50 {statistics.median(values):6.3f}   p90 "
                      f"{pct(values, 0.9):6.3f}   max {max(values):6.3f}{warm}")
    print(f"  placed on: {dict(Counter(r['node'] for r in [cold, *ray_runs, *local_runs]))}")
    print("  measured apart (s):")
    for key, values in refs.items():
        print(f"    {key:26s} median {statistics.median(values):6.3f}   "
              f"{[round(v, 3) for v in values]}")
