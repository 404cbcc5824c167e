"""``evaltui set run|show|ls|cancel|resume|watch``: experiment sets (docs/architecture.md).

``set run FILE`` checks the whole set file (exit 2 and one line naming the field, nothing
written), writes the set dir, submits the members to ``$BACKEND_URL`` or, without one,
to a scheduler embedded in this process, follows them and prints the set's table. Run
again, it continues where it stopped. Exit codes as ``evaltui eval``'s: 0 every member
done within its error allowance, 1 a member failed (after its retries) or was held back,
2 a bad set file or set reference, 130 Ctrl-C or a cancelled member.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

from rich.console import Console
from rich.markup import escape

from evaltui.commands import set_show, set_watch
from evaltui.commands.console import error, warning
from evaltui.commands.set_drive import common_arguments, drive, runner_arguments, runner_options
from evaltui.commands.set_remote import cancel_remote, run_remote
from evaltui.commands.set_slurm import file_and_dir, is_batch
from evaltui.contract.setspec import SetFileError
from evaltui.contract.settings import settings
from evaltui.sets.dispatch import cancel_set as cancel_members
from evaltui.sets.dispatch import local_target
from evaltui.sets.plan import plan_data, plan_record
from evaltui.sets.setdir import SetDirError, list_sets, read_set, resolve_set
from evaltui.sets.targets import TargetError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("set",
                       description="Run, follow and tabulate experiment sets (a set file's "
                       "matrix of graphs, splits, params, repeats and checkpoints).")
    cmds = p.add_subparsers(dest="set_command", metavar="SUBCOMMAND", required=True)
    run = cmds.add_parser("run", help="submit a set file's members, follow them, print the "
                          "table (again: continue where it stopped)")
    run.add_argument("file", help="the set file (YAML or JSON)")
    runner_arguments(run)
    run.set_defaults(func=lambda a: _runner_command(a, "run"))
    resume = cmds.add_parser("resume", help="continue a set from its set.json: resume "
                             "incomplete members, retry failed ones")
    resume.add_argument("set", help="set dir or set id")
    runner_arguments(resume)
    resume.set_defaults(func=lambda a: _runner_command(a, "resume"))
    cancel = cmds.add_parser("cancel", help="cancel every queued or running member")
    cancel.add_argument("set", help="set dir or set id")
    common_arguments(cancel)
    cancel.set_defaults(func=cancel_set)
    ls = cmds.add_parser("ls", help="the sets under the outputs root")
    common_arguments(ls)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=list_sets_command)
    set_show.add_parser(cmds)
    set_watch.add_parser(cmds)


def _backend_url(args: argparse.Namespace) -> str | None:
    """``--url`` or ``$BACKEND_URL``: then the commands are clients of its /sets routes."""
    return getattr(args, "url", None) or settings().backend_url or None


def _runner_command(args: argparse.Namespace, kind: str) -> int:
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


def list_sets_command(args: argparse.Namespace) -> int:
    records = list_sets(args.outputs)
    if args.json:
        print(json.dumps([{"set_id": r.set_id, "name": r.name, "members": len(r.members),
                           "states": dict(Counter(m.state.value for m in r.members))}
                          for r in records], indent=2))
        return 0
    console = Console()
    if not records:
        console.print("no sets")
        return 0
    for r in records:
        counts = Counter(m.state.value for m in r.members)
        states = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        console.print(f"[bold]{escape(r.set_id)}[/]  {len(r.members)} members  {states}",
                      highlight=False)
    return 0
