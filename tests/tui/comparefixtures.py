"""A second finished run on the same episodes as the fixture's ``done`` run, with three
successes flipped (0 and 1 lost, 3 gained), for the compare screen's tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from runfixtures import write_summary

FLIPPED_ID = "20260115_091000"
LOST = (0, 1)
GAINED = (3,)


def flipped_run(done: Path) -> Path:
    """Copy ``done`` (ep dirs and all) as run FLIPPED_ID and flip its rows' success."""
    run_b = done.parent / FLIPPED_ID
    shutil.copytree(done, run_b)
    rows = json.loads((done / "summary.json").read_text())["episodes"]
    for row in rows:
        index = row["episode_index"]
        if index in LOST + GAINED:
            success = 1.0 if index in GAINED else 0.0
            row["metrics"].update(success=success, spl=0.7 * success, sdtw=0.7 * success,
                                  nav_error=0.0 if success else 2.0)
        row["run_id"] = FLIPPED_ID
    write_summary(run_b, rows, status="done", total=20)
    return run_b
