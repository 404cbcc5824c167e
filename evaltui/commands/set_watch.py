"""``evaltui set watch FILE``: evaluate checkpoints as training writes them.

The set file's checkpoint axis names a directory (``checkpoint: {watch: DIR, glob,
param}``). Each checkpoint is queued once it is complete (its ``.done`` sidecar, or
unchanged for ``--settle`` seconds), in step order; the watch ends after ``--until N``
checkpoints, when a ``STOP`` file appears (set dir or watched dir), or on Ctrl-C, and
prints the table with a plot of each metric over the steps. Restarted, it evaluates no
checkpoint twice (members are known by their key in set.json).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from evaltui.commands.console import error
from evaltui.commands.set_drive import drive, runner_options
from evaltui.contract.setspec import SetFileError
from evaltui.engine.executor.kinds import executor_kind
from evaltui.sets.plan import plan_file
from evaltui.sets.watch import CheckpointScanner, watch_set


def watch_command(args: argparse.Namespace) -> int:
    console = Console(stderr=True, soft_wrap=True)  # piped: lines whole, never folded
    path = Path(args.file)
    try:
        options = runner_options(args)
        if args.until is not None and args.until < 1:
            raise SetFileError("--until", f"must be >= 1, got {args.until}")
        shape = plan_file(path, args.outputs, check=False, checkpoints=[])
        if executor_kind(shape.setfile.base.executor).batch:
            raise SetFileError("base.executor", "set watch does not submit Slurm job arrays; "
                               "`evaltui set run` again submits the checkpoints found since")
        axis = shape.setfile.checkpoint
        if axis is None or axis.watch is None:
            raise SetFileError("matrix.checkpoint.watch", "set watch needs a checkpoint axis "
                               "that names the directory training writes to")
        scanner = CheckpointScanner(shape.expansion.base_dir / axis.watch, axis.glob,
                                    settle_sec=args.settle)
        ready = scanner.complete()
        # Every param is held to its graph now, not at the first checkpoint. Before the
        # first checkpoint a stand-in path takes its place; what the checkpoint param's own
        # check says of that path (e.g. "no such file") is for the real checkpoints to say.
        try:
            plan_file(path, args.outputs,
                      checkpoints=ready[:1] or [scanner.directory / "_0.npz"])
        except SetFileError as exc:
            if ready or exc.field != "matrix.checkpoint.param":
                raise
        plan = plan_file(path, args.outputs, check=False, checkpoints=ready)
    except SetFileError as exc:
        return error(str(exc))

    def members_for(files: list[Path]) -> list:
        return plan_file(path, args.outputs, check=False, checkpoints=files).expansion.members

    def watch(runner: object) -> None:
        console.print(f"watching {escape(str(scanner.directory))} for {escape(axis.glob)}",
                      highlight=False)
        watch_set(runner, scanner, members_for, set_dir=plan.path,  # type: ignore[arg-type]
                  until=args.until)

    args.detach = False
    return drive(plan, args, options, console, watch=watch)
