"""Issue 15 targets, measured side by side in one run: scaling, worker start, batching.

Run: ``pytest -m bench -s tests/benchmarks/test_bench_harness.py``. The machine is shared
and noisy, so each measurement is repeated (``EVALTUI_BENCH_REPEAT``, default 3) with
the compared variants interleaved, and the table prints the median and the range.
Nothing here asserts a time.

- in-run S(6): 48 GoToLocal bot episodes at ``sim_latency_ms=20`` (frames off), K=1 vs
  K=6, ``elapsed_sec`` of summary.json, which includes the workers' start;
- whole command: ``evaltui eval bot --split GoToObjMaze --episodes 48`` at
  ``sim_latency_ms=10`` (frames as shipped), K=1 vs K=4, wall clock of the command;
- batching: 8 caller processes and two host subprocesses of the shipped numpy model, one
  batching and one serving one by one; the callers alternate bursts between them, so
  both see the same machine load, and the ratio is the median over the rounds; and the
  zero-cost limit: the model's batched forward called in-process on pre-stacked
  inputs, B=8 vs B=1 (same BLAS threads as the host: one);
- worker start: fork request -> ``ready`` per worker (p50), K=6 from ``pool.start()``
  to the last ``ready``, the zygote's own cold start, and what a cold interpreter with
  the same imports costs (how every worker used to start).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_bench_pool import GRAPHS, MODEL, observations, timed_run

from evaltui.contract.spec import parse_spec
from evaltui.engine.executor.local.pool import EnvWorkerPool
from evaltui.engine.executor.local.worker import WorkerConfig
from evaltui.engine.executor.local.zygote import WorkerZygote
from evaltui.engine.graph.specchecks import check_spec
from evaltui.engine.hosting.channel import new_secret
from evaltui.engine.hosting.hostprocess import HostConfig, HostProcess
from evaltui.engine.hosting.proxy import connect

REPEAT = int(os.environ.get("EVALTUI_BENCH_REPEAT", "3"))


def bot_graph(**env: Any) -> dict[str, Any]:
    graph = json.loads((GRAPHS / "bot.json").read_text())
    graph["nodesets"]["env"]["params"].update(env)
    return graph


# ---- scaling ---------------------------------------------------------------------------------

def in_run_s6(tmp_path: Path, rep: int) -> dict[str, float]:
    graph = bot_graph(frame_stride=0, sim_latency_ms=20)
    one = timed_run(tmp_path, graph, 1, 48, f"s6-{rep}-k1")
    six = timed_run(tmp_path, graph, 6, 48, f"s6-{rep}-k6")
    return {"ratio": one["in_run"] / six["in_run"], "k1": one["in_run"], "k6": six["in_run"],
            "phase": one["episodes"] / six["episodes"]}


def whole_command(outputs: Path, workers: int) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "evaltui.cli", "eval", "bot", "--split", "GoToObjMaze",
         "--episodes", "48", "--workers", str(workers), "--set", "env.sim_latency_ms=10",
         "--outputs", str(outputs), "--json"], capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    return wall


def whole_k4(tmp_path: Path, rep: int) -> dict[str, float]:
    one = whole_command(tmp_path / f"w{rep}", 1)
    four = whole_command(tmp_path / f"w{rep}", 4)
    return {"ratio": one / four, "k1": one, "k4": four}


@pytest.mark.bench
def test_whole_command(tmp_path: Path) -> None:
    """Only the whole-command row (``-k whole``): ``evaltui eval`` K=4 vs K=1, wall clock."""
    k4 = repeated(lambda rep: whole_k4(tmp_path, rep))
    print(f"\nwhole command, 48 GoToObjMaze episodes at 10 ms/step, median (min-max) of "
          f"{REPEAT} runs, load {os.getloadavg()[0]:.1f}")
    print(f"  K=4 vs K=1: {med(k4['ratio'])}  (target >= 3.6)")
    print(f"  K=1 / K=4 wall seconds: {med(k4['k1'])} / {med(k4['k4'])}")


# ---- batching --------------------------------------------------------------------------------

ZERO_COST = """
import json, sys, time
sys.path.insert(0, {bench!r})
from test_bench_pool import observations
from evaltui.benchmarks.babyai.model import BabyAIModelPolicy
from evaltui.engine.hosting.stacking import stack
model = BabyAIModelPolicy()
obs = observations(400)
def rate(b):
    batches = [{{"obs": stack(obs[i:i + b])}} for i in range(0, len(obs) - b + 1, b)]
    for batch in batches[:10]:
        model.call("act", batch)
    best = 0.0
    for _ in range(5):
        t0 = time.perf_counter()
        for batch in batches:
            model.call("act", batch)
        best = max(best, len(batches) * b / (time.perf_counter() - t0))
    return best
print(json.dumps({{"b1": rate(1), "b8": rate(8)}}))
"""


def zero_cost_limit() -> dict[str, float]:
    """B=8 vs B=1 forward passes in one process, no transport (BLAS: one thread)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    code = ZERO_COST.format(bench=str(Path(__file__).parent))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300, check=True)
    rates = json.loads(out.stdout.strip().splitlines()[-1])
    return {"ratio": rates["b8"] / rates["b1"], **rates}


def _burst_caller(urls: list[str], secret: bytes, obs: list[Any], rounds: int,
                  barrier: Any, cpu_out: Any) -> None:
    proxies = [connect(url, secret) for url in urls]
    for proxy in proxies:
        proxy.call("act", {"obs": obs[0]})  # connected and a known caller
    cpu = [0.0] * len(proxies)  # this caller's CPU seconds in the bursts, per host
    for _ in range(rounds):
        for i, proxy in enumerate(proxies):
            barrier.wait()
            c0 = time.process_time()
            for o in obs:
                proxy.call("act", {"obs": o})
            cpu[i] += time.process_time() - c0
            barrier.wait()
    for proxy in proxies:
        proxy.close()
    cpu_out.put(cpu)


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of a process so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def batching(rep: int, callers: int = 8, requests: int = 150,
             rounds: int = 5) -> dict[str, float]:
    """Median over rounds of (batched req/s) / (one-by-one req/s), bursts alternating.

    Also the CPU per request of each side (host process; callers summed), batched and
    one by one: where the time goes.
    """
    secret = new_secret()
    sockets = Path(tempfile.mkdtemp(prefix="evt-"))
    hosts = [HostProcess(HostConfig(name=f"p{i}", impl=MODEL, secret=secret, params={},
                                    url=f"evaltui+unix://{sockets}/{i}.sock",
                                    batching=batched, max_batch_size=64, max_wait_ms=2.0))
             for i, batched in enumerate((True, False))]
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(callers + 1)
    cpu_out = ctx.Queue()
    obs = observations(requests)
    procs = [ctx.Process(target=_burst_caller, args=([h.url for h in hosts], secret, obs,
                                                     rounds, barrier, cpu_out))
             for _ in range(callers)]
    rates: dict[int, list[float]] = {0: [], 1: []}
    host_cpu = [0.0, 0.0]
    caller_cpu = [0.0, 0.0]
    try:
        for host in hosts:
            host.start()
        for p in procs:
            p.start()
        for _ in range(rounds):
            for i in (0, 1):
                barrier.wait(timeout=120)
                c0 = _process_cpu(hosts[i].pid)  # type: ignore[arg-type]
                t0 = time.perf_counter()
                barrier.wait(timeout=300)
                rates[i].append(callers * requests / (time.perf_counter() - t0))
                host_cpu[i] += _process_cpu(hosts[i].pid) - c0  # type: ignore[arg-type]
        for _ in procs:
            for i, seconds in enumerate(cpu_out.get(timeout=60)):
                caller_cpu[i] += seconds
        with connect(hosts[0].url, secret) as probe:
            mean_batch = probe.stats()["mean_batch_size"]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()
        for host in hosts:
            host.stop()
        shutil.rmtree(sockets, ignore_errors=True)
    ratios = [b / s for b, s in zip(rates[0], rates[1], strict=True)]
    us = 1e6 / (callers * requests * rounds)
    return {"ratio": statistics.median(ratios), "batched": statistics.median(rates[0]),
            "single": statistics.median(rates[1]), "mean_batch": mean_batch,
            "host_us_batched": host_cpu[0] * us, "host_us_single": host_cpu[1] * us,
            "callers_us_batched": caller_cpu[0] * us, "callers_us_single": caller_cpu[1] * us}


# ---- worker start ----------------------------------------------------------------------------

PRELOAD = ["evaltui.benchmarks.babyai.bot", "evaltui.benchmarks.babyai.env"]


def worker_start(tmp_path: Path, rep: int) -> dict[str, float]:
    spec = {"graph": bot_graph(frame_stride=0), "eval": {"split": "GoToLocal",
                                                         "episode_count": 6}}
    checked = check_spec(parse_spec(spec))
    t0 = time.perf_counter()
    with WorkerZygote(PRELOAD) as zygote:
        assert zygote.wait_ready(120)
        cold = time.perf_counter() - t0
        pool = EnvWorkerPool(lambda slot: WorkerConfig(tmp_path, slot, checked, {}), 6,
                             zygote=zygote)
        t0 = time.perf_counter()
        pool.start()
        try:
            while len(pool.start_times) < 6:
                for slot in pool.slots:
                    if not slot.ready and slot.child is not None and slot.child.conn.poll(0):
                        pool._on_message(slot)
                time.sleep(0.0002)
            k6 = time.perf_counter() - t0
        finally:
            pool.close()
    t0 = time.perf_counter()
    imports = ", ".join(("evaltui.engine.executor.local.worker", *PRELOAD))
    subprocess.run([sys.executable, "-c", f"import {imports}"],
                   check=True)
    interpreter = time.perf_counter() - t0
    return {"p50": statistics.median(pool.start_times), "k6": k6, "zygote": cold,
            "interpreter": interpreter}


# ---- the table -------------------------------------------------------------------------------

def repeated(measure: Callable[[int], dict[str, float]]) -> dict[str, list[float]]:
    runs = [measure(rep) for rep in range(REPEAT)]
    return {key: [r[key] for r in runs] for key in runs[0]}


def med(values: list[float], fmt: str = "{:.2f}") -> str:
    text = fmt.format(statistics.median(values))
    if len(values) > 1:
        text += f" ({fmt.format(min(values))}-{fmt.format(max(values))})"
    return text


@pytest.mark.bench
def test_harness_targets(tmp_path: Path) -> None:
    start = repeated(lambda rep: worker_start(tmp_path, rep))
    batch = repeated(batching)
    limit = repeated(lambda rep: zero_cost_limit())
    s6 = repeated(lambda rep: in_run_s6(tmp_path, rep))
    k4 = repeated(lambda rep: whole_k4(tmp_path, rep))
    ms = "{:.1f} ms"
    print(f"\nharness targets (issue 15), median (min-max) of {REPEAT} interleaved runs, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"  {'measured':<68} {'result':<22} target")
    rows = [
        ("in-run S(6), 48 short episodes, 20 ms/step (worker start included)",
         med(s6["ratio"]), ">= 4.5"),
        ("  K=1 / K=6 in-run seconds; episode phase S(6)",
         f"{med(s6['k1'])} / {med(s6['k6'])}; {med(s6['phase'])}", ""),
        ("whole command, 48 GoToObjMaze episodes at 10 ms/step, K=4 vs K=1",
         med(k4["ratio"]), ">= 3.6"),
        ("  K=1 / K=4 wall seconds", f"{med(k4['k1'])} / {med(k4['k4'])}", ""),
        ("batching, shipped numpy model, 8 callers vs one by one (median of rounds)",
         med(batch["ratio"]), ">= 2.5"),
        ("  req/s batched / one by one; mean batch",
         f"{med(batch['batched'], '{:.0f}')} / {med(batch['single'], '{:.0f}')}; "
         f"{med(batch['mean_batch'])}", ""),
        ("  CPU us/request host + callers, batched; one by one",
         f"{med(batch['host_us_batched'], '{:.0f}')} + "
         f"{med(batch['callers_us_batched'], '{:.0f}')}; "
         f"{med(batch['host_us_single'], '{:.0f}')} + "
         f"{med(batch['callers_us_single'], '{:.0f}')}", ""),
        ("  zero-cost transport limit (in-process forward, B=8 vs B=1)", med(limit["ratio"]),
         ""),
        ("  forward passes/s in-process, B=1 / B=8 (requests/s)",
         f"{med(limit['b1'], '{:.0f}')} / {med(limit['b8'], '{:.0f}')}", ""),
        ("worker start, fork request -> ready, p50 per worker",
         med([v * 1e3 for v in start["p50"]], ms), "<= 100 ms"),
        ("K=6 workers, pool.start() -> all ready (warm zygote)",
         med([v * 1e3 for v in start["k6"]], ms), ""),
        ("  zygote cold start (once per run, overlaps the run's own start)",
         med([v * 1e3 for v in start["zygote"]], ms), ""),
        ("  cold interpreter + the same imports (each worker, before)",
         med([v * 1e3 for v in start["interpreter"]], ms), ""),
    ]
    for label, result, target in rows:
        print(f"  {label:<68} {result:<22} {target}")


@pytest.mark.bench
def test_batching_only() -> None:
    """Only the batching rows: 8 callers batched vs one by one, and the zero-cost limit."""
    batch = repeated(batching)
    limit = repeated(lambda rep: zero_cost_limit())
    us = "{:.0f}"
    print(f"\nbatching (issue 15 item 4), median (min-max) of {REPEAT} runs, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"  8 callers vs one by one: {med(batch['ratio'])}  (target >= 2.5)")
    print(f"  req/s batched / one by one: {med(batch['batched'], us)} / "
          f"{med(batch['single'], us)}; mean batch {med(batch['mean_batch'])}")
    print(f"  CPU us per request, batched: host {med(batch['host_us_batched'], us)}, callers "
          f"{med(batch['callers_us_batched'], us)}; one by one: host "
          f"{med(batch['host_us_single'], us)}, callers {med(batch['callers_us_single'], us)}")
    print(f"  zero-cost limit (in-process forward, B=8 vs B=1): {med(limit['ratio'])}; "
          f"B=1 / B=8 req/s {med(limit['b1'], '{:.0f}')} / {med(limit['b8'], '{:.0f}')}")
