"""Issue 34: a 16-member set on 2 cores, with CPU admission against all at once.

Run: ``pytest -m bench -s tests/benchmarks/test_bench_cpu_admission.py``. The same set
(16 members, ``repeat: 16``: the bot on GoToLocal, K=2, 50 episodes each) is run by
``evaltui set run`` in a fresh process, with ``EVALTUI_CPUS=2`` (the first member
reserves 2 cores and runs alone; the graph's measured CPU use then sets what the others
reserve) and with ``EVALTUI_CPUS=1024`` (what admission did before
cores were admitted: all 16 start at once, 48 processes on 2 cores). Printed: the wall
clock of each and their ratio; nothing is asserted about time.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.bench

MEMBERS = 16
EPISODES = 50
ROUNDS = 2
"""Rounds of the pair, interleaved (raise it on a quiet machine)."""


def run_set(tmp_path: Path, name: str, cpus: str) -> float:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name, "base": {"graph": "bot", "dataset": "babyai", "split": "GoToLocal",
                               "episodes": EPISODES, "workers": 2},
        "matrix": {"repeat": MEMBERS}}))
    env = {**os.environ, "EVALTUI_CPUS": cpus, "EVALTUI_OUTPUTS": str(tmp_path / name)}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "evaltui.cli", "set", "run", str(path)],
                          env=env, capture_output=True, text=True, timeout=1800)
    took = time.perf_counter() - started
    assert proc.returncode == 0, proc.stderr[-2000:]
    return took


def test_a_16_member_set_on_2_cores(tmp_path: Path) -> None:
    admitted, at_once = [], []
    for round_no in range(ROUNDS):  # interleaved: load changes hit both sides alike
        admitted.append(run_set(tmp_path, f"cores{round_no}", "2"))
        at_once.append(run_set(tmp_path, f"once{round_no}", "1024"))
    a, b = statistics.median(admitted), statistics.median(at_once)
    print(f"\n{MEMBERS}-member set (bot, GoToLocal, K=2, {EPISODES} episodes each) on 2 "
          f"cores, median of {ROUNDS} interleaved")
    print(f"  CPU admission                         {a:7.1f} s   {admitted}")
    print(f"  all at once (before)                  {b:7.1f} s   {at_once}")
    print(f"  all at once / CPU admission: {b / a:.2f}")
