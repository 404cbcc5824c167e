"""The cost of a nodeset in its own Python environment (issue 30's benchmark).

Run: ``pytest -m bench -s tests/benchmarks/test_bench_foreign_env.py``. Prints, side by side
in one run, the per-step time of an env whose step takes 1 ms, in-process and in a second
environment (numpy 1.x there, 2.x here), with a 7x7x3 observation and a 224x224x3 image
(µs per step, the boundary's own cost and the ratio; a 0 ms step too, the round trip
alone; targets: <= 0.15 ms a step for the
small observation, <= 0.5 ms for the image), and the environment's build time cold (an
empty evaltui cache; uv's download cache as it is) and cached. Nothing asserts a time.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from evaltui.engine.foreign.envcache import ensure_built
from evaltui.engine.foreign.envspec import parse_environment
from evaltui.engine.foreign.standin import foreign_class

FOREIGN_TESTS = Path(__file__).resolve().parents[1] / "engine" / "foreign"
sys.path.insert(0, str(FOREIGN_TESTS))
from ownenv_helpers import NUMPY1  # noqa: E402

pytestmark = pytest.mark.bench
STEPS = 400
ROUNDS = 5


def per_step_us(env: object, steps: int) -> tuple[float, float]:
    """Wall µs per step, and CPU µs per step of this process plus the env's host (if any):
    CPU time is what the boundary costs on a loaded machine, where wall time mostly
    measures waiting for a core."""
    env.set_episode({"seed": 0})  # type: ignore[attr-defined]
    call = env.call  # type: ignore[attr-defined]
    pid = getattr(env, "host_pid", None)
    host = psutil.Process(pid) if pid else None
    cpu0 = time.process_time() + (sum(host.cpu_times()[:2]) if host else 0.0)
    t0 = time.perf_counter()
    for _ in range(steps):
        call("step", {"action": 0})
    wall = (time.perf_counter() - t0) / steps * 1e6
    cpu = time.process_time() + (sum(host.cpu_times()[:2]) if host else 0.0) - cpu0
    return wall, cpu / steps * 1e6


def test_bench_boundary_per_step_and_build_time(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_ENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(FOREIGN_TESTS))
    spec = parse_environment({"requirements": NUMPY1})
    t0 = time.monotonic()
    ensure_built(spec, "nodeset 'env'")
    cold = time.monotonic() - t0
    t0 = time.monotonic()
    ensure_built(spec, "nodeset 'env'")
    cached = time.monotonic() - t0
    import own_env_nodesets  # the in-process twin

    print(f"\nenvironment build ({'+'.join(NUMPY1)}): cold {cold:.1f} s, cached "
          f"{cached * 1e3:.1f} ms")
    cls = foreign_class("env", "own_env_nodesets:TimedStepEnv", spec)
    print(f"{'observation':>12} {'step':>5} {'in-process':>12} {'own env':>10} "
          f"{'boundary':>10} {'ratio':>6}   {'CPU in-process':>14} {'CPU own env':>11} "
          f"{'CPU boundary':>12}")
    for shape, step_ms in (((7, 7, 3), 1.0), ((224, 224, 3), 1.0), ((7, 7, 3), 0.0),
                           ((224, 224, 3), 0.0)):
        params = {"shape": list(shape), "step_ms": step_ms, "max_steps": 10**9}
        local = own_env_nodesets.TimedStepEnv(**params)
        remote = cls(**params)
        try:
            obs = remote.set_episode({"seed": 0})["obs"]
            assert obs.shape == shape and isinstance(obs, np.ndarray)
            per_step_us(remote, 50)  # warm both
            per_step_us(local, 50)
            here, there = [], []
            for _ in range(ROUNDS):  # interleaved: the machine's load hits both alike
                here.append(per_step_us(local, STEPS))
                there.append(per_step_us(remote, STEPS))
        finally:
            remote.close()
        a, b = (statistics.median(w for w, _ in here), statistics.median(w for w, _ in there))
        ca, cb = (statistics.median(c for _, c in here), statistics.median(c for _, c in there))
        print(f"{'x'.join(map(str, shape)):>12} {step_ms:>3.0f}ms {a:>9.0f} µs {b:>7.0f} µs "
              f"{b - a:>7.0f} µs {b / a:>6.2f}   {ca:>11.0f} µs {cb:>8.0f} µs "
              f"{cb - ca:>9.0f} µs")
