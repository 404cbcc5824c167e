"""``set run`` piped into a log (issue 35, item 11): each member's line whole, its run id
on it, not folded onto a line of its own at the pipe's width."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from evaltui.contract.setspec import SET_FILENAME, SETS_DIRNAME
from evaltui.rundir.jsonfiles import read_json

RUN_ID = re.compile(r"\d{8}_\d{6}(?:_\d+)?")


def test_piped_set_run_keeps_each_member_on_one_line(set_file: Callable[..., Path],
                                                     outputs: Path) -> None:
    path = set_file({"name": "piped", "base": {"graph": "bot", "episodes": 2, "workers": 1},
                     "matrix": {"split": ["GoToLocal", "GoToObjMaze"]}})
    env = {**os.environ, "COLUMNS": "50"}  # a narrow pipe: Rich folds at this width
    proc = subprocess.run([sys.executable, "-m", "evaltui.cli", "set", "run", str(path),
                           "--outputs", str(outputs)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    record = read_json(outputs / SETS_DIRNAME / "piped" / SET_FILENAME)
    lines = proc.stderr.splitlines()
    assert not any(RUN_ID.fullmatch(line.strip()) for line in lines), proc.stderr
    for member in record["members"]:
        split = member["axes"]["split"]
        assert any(line.startswith("done") and f"split={split}" in line
                   and member["run_id"] in line for line in lines), proc.stderr
