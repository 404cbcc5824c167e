"""A small experiment set over the suite's fixture run dirs: three checkpoints of one
policy (steps 100, 200, 300, success rising) and a fourth not yet submitted; the first
checkpoint is the baseline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from runfixtures import write_summary

from evaltui.contract.setspec import MemberState, SetMemberRecord, SetRecord
from evaltui.sets.setdir import set_dir, write_set

SET_ID = "ckpts"
STEPS = (100, 200, 300)
RUN_IDS = ("20260115_091100", "20260115_091200", "20260115_091300")
LOST = {100: (0, 1, 2, 4, 6), 200: (0, 1), 300: ()}
"""Episodes each checkpoint fails beyond the fixture's own failures."""


def checkpoint_run(done: Path, run_id: str, step: int) -> Path:
    """A copy of the fixture's done run with the episodes of ``LOST[step]`` failed."""
    run = done.parent / run_id
    shutil.copytree(done, run)
    rows = json.loads((done / "summary.json").read_text())["episodes"]
    for row in rows:
        if row["episode_index"] in LOST[step]:
            row["metrics"].update(success=0.0, spl=0.0, sdtw=0.0, nav_error=2.0)
        row["run_id"] = run_id
    write_summary(run, rows, status="done", total=20)
    return run


def build_set(outputs: Path, done: Path) -> Path:
    """The set dir (under ``outputs``) of the three checkpoints and a pending fourth."""
    members = []
    for step, run_id in zip(STEPS, RUN_IDS, strict=True):
        run = checkpoint_run(done, run_id, step)
        members.append(SetMemberRecord(
            key=f"{step:016x}", axes={"checkpoint": f"policy_{step:06d}.npz", "step": step},
            run_id=run_id, state=MemberState.DONE, attempts=1, run_dir=str(run)))
    members.append(SetMemberRecord(key=f"{400:016x}", axes={"checkpoint": "policy_000400.npz",
                                                            "step": 400}))
    path = set_dir(SET_ID, outputs)
    file = {"name": SET_ID, "base": {"graph": "bot", "episodes": 20},
            "matrix": {"checkpoint": {"param": "policy.weights", "glob": "ckpts/*.npz"}},
            "baseline": {"step": 100}}
    write_set(path, SetRecord(set_id=SET_ID, name=SET_ID, file=file, base_dir=str(outputs),
                              members=members))
    return path


LONG_ID = "ckpts-long"
LONG_STEPS = tuple(range(1000, 13000, 1000))
"""Twelve checkpoints: a set as a training run leaves it, more rows than 80x24 holds."""


def build_long_set(outputs: Path, done: Path) -> Path:
    """A checkpoint set of twelve finished members (success rising with the step)."""
    members = []
    for i, step in enumerate(LONG_STEPS):
        run_id = f"20260115_1{i:02d}000"
        run = outputs / "eval_runs" / run_id
        shutil.copytree(done, run)
        rows = json.loads((done / "summary.json").read_text())["episodes"]
        for row in rows:
            if row["episode_index"] < max(0, 8 - i):
                row["metrics"].update(success=0.0, spl=0.0, sdtw=0.0, nav_error=2.0)
            row["run_id"] = run_id
        write_summary(run, rows, status="done", total=20)
        members.append(SetMemberRecord(
            key=f"{step:016x}", axes={"checkpoint": f"policy_{step:06d}.npz", "step": step},
            run_id=run_id, state=MemberState.DONE, attempts=1, run_dir=str(run)))
    path = set_dir(LONG_ID, outputs)
    file = {"name": LONG_ID, "base": {"graph": "bot", "episodes": 20},
            "matrix": {"checkpoint": {"param": "policy.weights", "glob": "ckpts/*.npz"}},
            "baseline": {"step": LONG_STEPS[0]}}
    write_set(path, SetRecord(set_id=LONG_ID, name=LONG_ID, file=file, base_dir=str(outputs),
                              members=members))
    return path


GRID_ID = "grid"
GRID = [(g, s) for g in ("bot", "noisy_bot") for s in ("GoToLocal", "PickupLoc")]


def build_grid_set(outputs: Path, done: Path) -> Path:
    """A graph x split grid of four finished members (no checkpoint axis: no plots)."""
    members = []
    for i, (graph, split) in enumerate(GRID):
        run_id = f"20260115_2{i:02d}000"
        run = outputs / "eval_runs" / run_id
        shutil.copytree(done, run)
        rows = json.loads((done / "summary.json").read_text())["episodes"]
        for row in rows:
            if graph == "noisy_bot" and row["episode_index"] % (2 + i) == 0:
                row["metrics"].update(success=0.0, spl=0.0, sdtw=0.0, nav_error=3.0)
            row["run_id"] = run_id
        write_summary(run, rows, status="done", total=20)
        members.append(SetMemberRecord(
            key=f"{i:016x}", axes={"graph": graph, "split": split}, run_id=run_id,
            state=MemberState.DONE, attempts=1, run_dir=str(run)))
    path = set_dir(GRID_ID, outputs)
    file = {"name": GRID_ID, "base": {"episodes": 20},
            "matrix": {"graph": ["bot", "noisy_bot"], "split": ["GoToLocal", "PickupLoc"]},
            "baseline": {"graph": "bot", "split": "GoToLocal"}}
    write_set(path, SetRecord(set_id=GRID_ID, name=GRID_ID, file=file, base_dir=str(outputs),
                              members=members))
    return path
