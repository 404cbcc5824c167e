"""The runs already made for a set's members, found by the token in their spec.

``set run`` tags every submission with ``scheduling.set_member`` (``{key}#{attempt}``)
before it knows the run id, and records the id in set.json afterwards. A ``set run``
killed in between (SIGKILL in its first second) has made a run that set.json does not
name; the next one finds it here and adopts it instead of running the member twice. A run
dir whose writing was cut short (its staging dir and empty reservation, or from an older
evaltui spec.json without scheduler.json: never queued, never to run) is removed, so no
orphan is left either.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from evaltui.contract.records import SCHEDULER_FILENAME, SPEC_FILENAME
from evaltui.rundir.jsonfiles import read_json_object
from evaltui.rundir.layout import runs_root
from evaltui.rundir.store import reap_cut_short


def member_runs(outputs: str | os.PathLike[str], set_id: str) -> dict[str, str]:
    """``set_member`` token -> run id of every run of ``set_id`` under ``outputs``."""
    root = runs_root(Path(outputs))
    reap_cut_short(Path(outputs))
    found: dict[str, str] = {}
    for run_dir in sorted(root.iterdir()) if root.is_dir() else ():
        spec = read_json_object(run_dir / SPEC_FILENAME)  # None: not a run dir
        scheduling = spec.get("scheduling") if spec is not None else None
        if not isinstance(scheduling, dict) or scheduling.get("set_id") != set_id:
            continue
        token = scheduling.get("set_member")
        if not isinstance(token, str):
            continue
        if not (run_dir / SCHEDULER_FILENAME).is_file():
            shutil.rmtree(run_dir, ignore_errors=True)  # cut short while being written
            continue
        found[token] = run_dir.name
    return found
