"""Set benchmark: expanding a 1,000-member set file and showing its table (no runs).

Run: ``pytest -m bench -s tests/benchmarks/test_bench_sets.py``. Target (issue 21): the
expansion and ``set show`` of a 1,000-member set in under 1 s, in a warm process (the
imports of the command, ~0.5 s, are paid once per process and printed apart). Wall clock
on a shared machine: rerun before reading much into one number.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from evaltui.cli import main
from evaltui.contract.setspec import SetMemberRecord, SetRecord
from evaltui.sets.plan import plan_file
from evaltui.sets.setdir import write_set

pytestmark = pytest.mark.bench


def test_a_thousand_member_set_expands_and_shows_in_under_a_second(
        tmp_path: Path, isolated_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
        ) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump({
        "name": "big", "base": {"episodes": 20, "workers": 2},
        "matrix": {"graph": ["bot", "noisy_bot"],
                   "policy.noise": [round(i / 100, 2) for i in range(50)], "repeat": 10}}))
    cold = time.perf_counter()
    assert main(["set", "show", "warm-up"]) == 2  # imports the command's modules (no set)
    capsys.readouterr()
    started = time.perf_counter()
    plan = plan_file(path, check=False)
    expanded = time.perf_counter()
    write_set(plan.path, SetRecord(
        set_id=plan.set_id, name=plan.setfile.name, file=plan.file,
        base_dir=str(plan.expansion.base_dir),
        members=[SetMemberRecord(key=m.key, axes=m.axes) for m in plan.expansion.members]))
    written = time.perf_counter()
    assert main(["set", "show", "big", "--format", "md"]) == 0
    shown = time.perf_counter()
    table = capsys.readouterr().out
    assert len(plan.expansion.members) == 1000 and table.count("| pending |") == 1000
    total = shown - started
    print(f"\nimports {started - cold:.3f} s; "
          f"1,000 members: expand {expanded - started:.3f} s, write set.json "
          f"{written - expanded:.3f} s, set show {shown - written:.3f} s, total {total:.3f} s")
    assert total < 1.0


def test_a_48_member_set_on_a_fake_24_gib_gpu(
        tmp_path: Path, isolated_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """48 members x 20 episodes declaring 8 GiB each on one fake 24 GiB GPU: the set's
    wall clock against its members run one after another (the sum of their own run
    times), and the GPU memory-time the members held over what the GPU offered."""
    from datetime import datetime

    from evaltui.rundir.jsonfiles import read_json
    from evaltui.rundir.layout import runs_root

    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "1x24576")
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump({
        "name": "gpu48", "base": {"graph": "bot", "episodes": 20, "workers": 1,
                                  "vram_mb": 8192},
        "matrix": {"policy.noise": [round(i / 20, 2) for i in range(12)], "repeat": 4}}))
    started = time.perf_counter()
    assert main(["set", "run", str(path), "--json"]) == 0
    wall = time.perf_counter() - started
    capsys.readouterr()
    spans = []
    for run_dir in runs_root(isolated_dirs["outputs"]).iterdir():
        rec = read_json(run_dir / "scheduler.json")
        begin = datetime.fromisoformat(rec["admitted_at"]).timestamp()
        end = datetime.fromisoformat(rec["finished_at"]).timestamp()
        spans.append((begin, end))
    assert len(spans) == 48
    busy = sum(end - begin for begin, end in spans)
    first, last = min(b for b, _ in spans), max(e for _, e in spans)
    most = max(sum(1 for b, e in spans if b <= t < e) for t, _ in spans)
    used = sum(8 * (end - begin) for begin, end in spans)  # GiB-seconds held
    print(f"\n48 members x 20 episodes, 8 GiB each on a fake 24 GiB GPU: set wall clock "
          f"{wall:.1f} s (first admission to last finish {last - first:.1f} s) vs "
          f"{busy:.1f} s one after another ({busy / wall:.2f}x); at most {most} between "
          f"admission and reap; GPU memory-time used / available "
          f"{used / (24 * (last - first)):.2f}")
    # A run's reservation ends with its process, which the tick may see a moment before it
    # reaps the run and writes finished_at: the spans may overlap by one.
    assert most <= 4
