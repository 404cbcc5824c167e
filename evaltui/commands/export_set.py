"""``evaltui export SET_DIR --to ...``: a set's members as tracker runs grouped under it.

Each member with a run dir is exported as ``evaltui export RUN_DIR`` exports it, plus
its set (:mod:`evaltui.export.setmember`): a W&B group, an MLflow parent run (which
also holds each metric over the checkpoint steps), or a TensorBoard folder per set with
a subfolder per member (and ``curve_<group>`` runs with each metric over the steps).
Exporting again updates the same tracker runs. Exit codes as for a run.
"""

from __future__ import annotations

import argparse
import importlib
import warnings
from pathlib import Path
from typing import Any

from evaltui.commands.console import error, note
from evaltui.export.setmember import SetMember
from evaltui.results.runrows import RunDirError
from evaltui.runview.snapshot import read_snapshot
from evaltui.sets.setdir import SetDirError, read_set
from evaltui.sets.table import member_run_dir


def export_set(args: argparse.Namespace, set_path: Path) -> int:
    if args.run_name is not None:
        return error("--run-name is for a run dir; a set's runs are named by their axes", 2)
    try:
        record = read_set(set_path)
    except SetDirError as exc:
        return error(str(exc), 2)
    members: list[tuple[SetMember, Any]] = []
    for m in record.members:
        run_dir = member_run_dir(m, set_path.parent.parent)
        if run_dir is None:
            note(f"{m.axes}: no run yet ({m.state.value}); not exported")
            continue
        try:
            snap = read_snapshot(run_dir)
        except RunDirError as exc:
            note(f"{m.axes}: {exc}; not exported")
            continue
        step = m.axes.get("step")
        members.append((SetMember(record.set_id, m.key, dict(m.axes),
                                  step if isinstance(step, int) else None), snap))
    if not members:
        return error(f"set {record.set_id} has no member with a run to export", 2)
    try:
        where = _export(args, record.set_id, members)
    except Exception as exc:  # the tracker's own error
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return error(f"{args.to} failed: {first}", 1)
    print(f"exported set {record.set_id} ({len(members)} member runs) to {args.to}: {where}")
    return 0


def curves(members: list[tuple[SetMember, Any]], by_group: bool
           ) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """Group -> metric -> (step, mean) over the members with a checkpoint step."""
    out: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for member, snap in members:
        if member.step is None:
            continue
        group = member.group_label() if by_group else ""
        for metric, mean in (snap.summary.get("metrics") or {}).items():
            if isinstance(mean, int | float):
                out.setdefault(group, {}).setdefault(metric, []).append(
                    (member.step, float(mean)))
    return out


def _export(args: argparse.Namespace, set_id: str, members: list[tuple[SetMember, Any]]
            ) -> str:
    with warnings.catch_warnings():  # the trackers' own deprecations, as for a run
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        # optional: mlflow, tensorboard or wandb (the extra of that name)
        tracker = importlib.import_module(f"evaltui.export.to_{args.to}")
        if args.to == "tensorboard":
            for member, snap in members:
                tracker.export(snap, logdir=args.logdir, project=args.project, member=member)
            for group, metrics in curves(members, by_group=True).items():
                tracker.export_set_curve(args.logdir, args.project, set_id, group, metrics)
            base = Path(args.logdir) / args.project if args.project else Path(args.logdir)
            return str(base / set_id)
        if args.to == "mlflow":
            # MLflow's metric names take no "=": split=GoToLocal -> split:GoToLocal
            flat = {f"{metric}/{group.replace('=', ':')}": points
                    for group, metrics in curves(members, by_group=True).items()
                    for metric, points in metrics.items()}
            parent = tracker.set_parent_run(args.tracking_uri, set_id, args.project, flat)
            for member, snap in members:
                tracker.export(snap, tracking_uri=args.tracking_uri, project=args.project,
                               member=member, parent_run_id=parent)
            return f"{args.project or tracker.DEFAULT_EXPERIMENT}/{parent}"
        for member, snap in members:
            tracker.export(snap, project=args.project, directory=args.dir, member=member)
        return f"{args.project or tracker.DEFAULT_PROJECT} group {set_id}"
