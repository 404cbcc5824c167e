"""``evaltui export RUN_DIR --to wandb|mlflow|tensorboard``: a run into a tracker.

The run dir stays the source of truth: export reads it (after the run, or while it runs:
then what is finished, said so) and writes the tracker's run, the same one on every
export (see :mod:`evaltui.export.payload`). Exit codes: 0 exported, 1 the tracker
failed, 2 bad input (not a run dir, a flag for another tracker, the tracker's extra not
installed).
"""

from __future__ import annotations

import argparse
import importlib
import warnings
from pathlib import Path

from evaltui.commands.console import error, note
from evaltui.commands.export_set import export_set
from evaltui.commands.refs import RefError, add_outputs_option, resolve_run_or_set
from evaltui.results.runrows import RunDirError
from evaltui.runview.snapshot import RunSnapshot, read_snapshot

TRACKERS = ("mlflow", "tensorboard", "wandb")
"""``--to`` values: each the name of its extra (``pip install 'evaltui[NAME]'``), of the
package that extra installs and of its writer, ``evaltui.export.to_NAME``."""
ONLY_FOR = {"logdir": "tensorboard", "tracking_uri": "mlflow", "dir": "wandb"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        description="Export RUN_DIR's summary metrics (mean, 95% CI, n), spec (as config), "
        "episode rows (a table), running means (series over episodes) and a few episode "
        "GIFs to a tracker. Exporting the same run again updates its tracker run.")
    p.add_argument("run_dir", metavar="RUN_OR_SET", help="a run dir or run id "
                   "(outputs/eval_runs/RUN_ID), or a set dir or set id "
                   "(outputs/eval_sets/SET_ID: its members grouped under it)")
    add_outputs_option(p)
    p.add_argument("--to", required=True, choices=TRACKERS, help="the tracker")
    p.add_argument("--logdir", metavar="D", type=Path,
                   help="tensorboard: the log dir (the run goes to D/[PROJECT/]RUN_NAME)")
    p.add_argument("--tracking-uri", metavar="U",
                   help="mlflow: the tracking URI, e.g. sqlite:///mlflow.db or http://host:5000 "
                   "(default: MLflow's own, $MLFLOW_TRACKING_URI or ./mlruns)")
    p.add_argument("--dir", metavar="D", type=Path,
                   help="wandb: where its local files go (default ./wandb)")
    p.add_argument("--project", metavar="P",
                   help="W&B project, MLflow experiment or TensorBoard subfolder "
                   "(default: evaltui; none for TensorBoard)")
    p.add_argument("--run-name", metavar="NAME",
                   help="the tracker run's name (default: GRAPH RUN_ID)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for option, tracker in ONLY_FOR.items():
        if getattr(args, option) is not None and args.to != tracker:
            flag = "--" + option.replace("_", "-")
            return error(f"{flag} is for --to {tracker}, not --to {args.to}", 2)
    if args.to == "tensorboard" and args.logdir is None:
        return error("--to tensorboard needs --logdir D", 2)
    try:
        importlib.import_module(args.to)
    except ImportError:
        return error(f"--to {args.to} needs the {args.to} package: "
                     f"pip install 'evaltui[{args.to}]'", 2)
    try:
        kind, path = resolve_run_or_set(args.run_dir, args.outputs)
    except RefError as exc:
        return error(str(exc))
    if kind == "set":
        return export_set(args, path)
    try:
        snap = read_snapshot(path)
    except RunDirError as exc:
        return error(str(exc), 2)
    for line in snap.notes():
        note(line)
    try:
        with warnings.catch_warnings():
            # The trackers' own dependencies (SQLAlchemy, protobuf, pydantic) warn about
            # their deprecations: noise to someone exporting a run, not theirs to fix.
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            where = _export(args, snap)
    except Exception as exc:  # the tracker's own error (network, store, permissions)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return error(f"{args.to} failed: {first}", 1)
    print(f"exported run {snap.run_id} ({snap.state.value}, {len(snap.rows)} episodes) to "
          f"{args.to}: {where}")
    return 0


def _export(args: argparse.Namespace, snap: RunSnapshot) -> str:
    # optional: mlflow, tensorboard or wandb (the extra of that name)
    tracker = importlib.import_module(f"evaltui.export.to_{args.to}")
    if args.to == "tensorboard":
        return str(tracker.export(snap, logdir=args.logdir, project=args.project,
                                  run_name=args.run_name))
    if args.to == "mlflow":
        return tracker.export(snap, tracking_uri=args.tracking_uri, project=args.project,
                              run_name=args.run_name)
    return tracker.export(snap, project=args.project, run_name=args.run_name,
                          directory=args.dir)
