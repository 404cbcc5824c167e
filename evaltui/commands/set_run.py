"""``evaltui set run|resume|cancel``: this process drives the set (:mod:`set_drive`), or
the backend at ``--url`` / ``$BACKEND_URL`` does (:mod:`set_remote`); a set whose members go
to Slurm job arrays is always driven from here.
"""

from __future__ import annotations

import argparse

from rich.console import Console

from evaltui.commands.console import error, warning
from evaltui.commands.set_drive import drive, runner_options
from evaltui.commands.set_remote import cancel_remote, run_remote
from evaltui.commands.set_slurm import file_and_dir, is_batch
from evaltui.contract.setspec import SetFileError
from evaltui.contract.settings import settings
from evaltui.sets.dispatch import cancel_set as cancel_members
from evaltui.sets.dispatch import local_target
from evaltui.sets.plan import plan_data, plan_record
from evaltui.sets.setdir import SetDirError, read_set, resolve_set
from evaltui.sets.targets import TargetError


def _backend_url(args: argparse.Namespace) -> str | None:
    """``--url`` or ``$BACKEND_URL``: then the commands are clients of its /sets routes."""
    return getattr(args, "url", None) or settings().backend_url or None


def runner_command(args: argparse.Namespace) -> int:
    """``set run FILE`` and ``set resume SET``."""
    kind = args.set_command
    # soft_wrap: piped, a line is never folded at 80 columns (run ids on lines of their own)
    console = Console(stderr=True, soft_wrap=True)
    try:
        options = runner_options(args)
        data, base_dir = file_and_dir(args, kind)
        url = _backend_url(args)
        if url and not is_batch(data):  # the backend runs the set (its /sets routes)
            return run_remote(args, kind, url, options)
        plan = plan_data(data, base_dir, args.outputs, check=True)
    except (SetFileError, SetDirError) as exc:
        return error(str(exc))
    for line in plan.warnings:
        warning(line)
    return drive(plan, args, options, console)


def cancel_set(args: argparse.Namespace) -> int:
    url = _backend_url(args)
    try:
        plan = plan_record(read_set(resolve_set(args.set, args.outputs)), args.outputs)
    except (SetDirError, SetFileError) as exc:
        plan, refused = None, exc
    if url and (plan is None or not is_batch(plan.file)):  # the backend's set
        return cancel_remote(args, url)
    if plan is None:
        return error(str(refused))
    out = Console()
    try:
        target = local_target(plan, args.outputs,
                              say=lambda line: out.print(line, highlight=False))
        asked = cancel_members(plan, target)
    except (TargetError, SetDirError) as exc:
        return error(str(exc), 1)
    out.print(f"set {plan.set_id}: cancel asked of {asked} member run(s)", highlight=False)
    return 0
