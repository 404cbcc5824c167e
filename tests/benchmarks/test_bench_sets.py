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
from evaltui.sets.plan import plan_file
from evaltui.sets.setdir import write_set
from evaltui.setspec import SetMemberRecord, SetRecord

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
