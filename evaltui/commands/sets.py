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
from typing import Any

from rich.console import Console
from rich.markup import escape

from evaltui.commands.console import FAILED, error, warning
from evaltui.contract.setspec import MemberState, SetFileError, SetRecord, member_label


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("set", help="experiment sets: a grid of runs as one unit",
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
    _common(cancel)
    cancel.set_defaults(func=cancel_set)
    ls = cmds.add_parser("ls", help="the sets under the outputs root")
    _common(ls)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=list_sets_command)
    from evaltui.commands import set_show, set_watch

    set_show.add_parser(cmds)
    set_watch.add_parser(cmds)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--outputs", help="outputs root (default $EVALTUI_OUTPUTS or ./outputs)")
    p.add_argument("--url", help="backend URL (default $BACKEND_URL; unset: an embedded "
                   "scheduler)")


def runner_arguments(p: argparse.ArgumentParser) -> None:
    """The options of a command that drives a set (run, resume, watch)."""
    _common(p)
    p.add_argument("--retries", type=int, default=0, metavar="N",
                   help="attempts after the first for a failed or aborted member (default 0)")
    p.add_argument("--retry-backoff", type=float, default=2.0, metavar="SEC",
                   help="wait before a member's first retry, doubled for each further one")
    p.add_argument("--max-error-rate", type=float, default=None, metavar="F",
                   help="stop submitting once more than this share of the members failed")
    p.add_argument("--max-parallel", type=int, default=None, metavar="N",
                   help="members queued or running at once, at most (default: as many as "
                   "the scheduler admits by memory and CPU cores)")
    p.add_argument("--detach", action="store_true", help="submit and return at once")
    p.add_argument("--json", action="store_true", help="print the final table as JSON")
    p.add_argument("--metrics", help="metrics of the final table, comma separated")
    from evaltui.commands import set_slurm

    set_slurm.add_options(p)


def runner_options(args: argparse.Namespace) -> Any:
    from evaltui.sets.runner import RunnerOptions

    if args.retries < 0:
        raise SetFileError("--retries", f"must be >= 0, got {args.retries}")
    rate = args.max_error_rate
    if rate is not None and not 0 <= rate <= 1:
        raise SetFileError("--max-error-rate", f"must be in [0, 1], got {rate}")
    cap = args.max_parallel
    if cap is not None and cap < 1:
        raise SetFileError("--max-parallel", f"must be >= 1, got {cap}")
    return RunnerOptions(retries=args.retries, max_error_rate=rate,
                         backoff_sec=max(0.0, args.retry_backoff), max_parallel=cap)


def _backend_url(args: argparse.Namespace) -> str | None:
    """``--url`` or ``$BACKEND_URL``: then the commands are clients of its /sets routes."""
    from evaltui.contract.settings import settings

    return getattr(args, "url", None) or settings().backend_url or None


def _runner_command(args: argparse.Namespace, kind: str) -> int:
    from evaltui.commands.set_slurm import file_and_dir, is_batch
    from evaltui.sets.plan import plan_data
    from evaltui.sets.setdir import SetDirError

    # soft_wrap: piped, a line is never folded at 80 columns (run ids on lines of their own)
    console = Console(stderr=True, soft_wrap=True)
    try:
        options = runner_options(args)
        data, base_dir = file_and_dir(args, kind)
        url = _backend_url(args)
        if url and not is_batch(data):  # the backend runs the set (its /sets routes)
            from evaltui.commands.set_remote import run_remote

            return run_remote(args, kind, url, options)
        plan = plan_data(data, base_dir, args.outputs, check=True)
    except (SetFileError, SetDirError) as exc:
        return error(str(exc))
    for line in plan.warnings:
        warning(line)
    return drive(plan, args, options, console)


def drive(plan: Any, args: argparse.Namespace, options: Any, console: Console,
          watch: Any = None) -> int:
    """Hold the set dir, open the target, run (or watch) the set, print its table."""
    import shutil

    from evaltui.api.settarget import open_target
    from evaltui.commands.set_follow import FollowPrinter
    from evaltui.sets.runner import SetRunner
    from evaltui.sets.setdir import SetBusy, hold_set
    from evaltui.sets.targets import SubmitRefused, TargetError

    def say(line: str) -> None:
        console.print(line, highlight=False)

    existed = plan.path.exists()
    try:
        with hold_set(plan.path):
            try:
                target = open_target(plan, args.outputs, args.url, say=say)
            except TargetError as exc:
                return error(str(exc), 1)
            printer = FollowPrinter(console, plan.set_id) if not args.detach else None
            header = [f"set [bold]{plan.set_id}[/]: {len(plan.expansion.members)} members "
                      f"on {target.label} -> {plan.path}"]

            def on_change(lives: Any) -> None:  # the header once the first step is sent
                while header:
                    console.print(header.pop(), highlight=False)
                if printer is not None:
                    printer(lives)
            runner = SetRunner(plan.expansion, plan.path, target, set_id=plan.set_id,
                               options=options, on_change=on_change)
            interrupted = False
            try:
                runner.prepare(plan.file)
                if watch is not None:
                    watch(runner)
                else:
                    runner.run(detach=args.detach)
            except KeyboardInterrupt:
                interrupted = True
            except SubmitRefused as exc:  # nothing of it is left; nor of a new set
                if not existed:
                    shutil.rmtree(plan.path, ignore_errors=True)
                return error(str(exc))
            finally:
                if printer is not None:
                    printer.close()
                target.close()
            record = runner.record
    except SetBusy as exc:
        return error(str(exc), 1)
    assert record is not None
    if args.detach:
        console.print(f"submitted; follow with `evaltui set show {plan.set_id}` (members wait "
                      "in the queue until a backend admits them)", highlight=False)
        return 0
    if interrupted:
        console.print(f"stopped following; started members go on (`evaltui set run` again "
                      f"continues, `evaltui set cancel {plan.set_id}` stops them)")
    from evaltui.commands.set_show import print_table

    print_table(record, args, as_json=args.json)
    return 130 if interrupted else exit_code(record, runner.held, console)


def exit_code(record: SetRecord, held: bool, console: Console) -> int:
    """eval's codes over the members: 1 any failed/aborted/held, 130 any cancelled, 1 a
    done member over its episode error allowance, else 0."""
    from evaltui.sets.table import member_run_dir

    bad = [m for m in record.members
           if m.state in (MemberState.FAILED, MemberState.ABORTED, MemberState.PENDING)]
    for m in bad:
        why = m.error or ("held back by --max-error-rate" if held else m.state.value)
        console.print(f"[red]{m.state.value}[/] {escape(member_label(m.axes))} after "
                      f"{m.attempts} attempt(s): {escape(why)}", highlight=False)
    if bad:
        return 1
    if any(m.state is MemberState.CANCELLED for m in record.members):
        return 130
    from evaltui.contract.records import SUMMARY_FILENAME
    from evaltui.rundir.jsonfiles import read_json

    for m in record.members:
        run_dir = member_run_dir(m, None)
        try:
            summary = read_json(run_dir / SUMMARY_FILENAME) if run_dir else {}
        except (OSError, ValueError):
            summary = {}
        if isinstance(summary, dict) and summary.get("error_rate_exceeded"):
            return error(f"{member_label(m.axes)}: {summary.get('error_count')} episodes "
                         f"errored (allowed: {summary.get('max_error_rate') or 0:.0%})",
                         FAILED)
    return 0


def cancel_set(args: argparse.Namespace) -> int:
    from evaltui.commands.set_slurm import is_batch
    from evaltui.sets.dispatch import cancel_set as cancel_members
    from evaltui.sets.dispatch import local_target
    from evaltui.sets.plan import plan_record
    from evaltui.sets.setdir import SetDirError, read_set, resolve_set
    from evaltui.sets.targets import TargetError

    url = _backend_url(args)
    try:
        plan = plan_record(read_set(resolve_set(args.set, args.outputs)), args.outputs)
    except (SetDirError, SetFileError) as exc:
        plan, refused = None, exc
    if url and (plan is None or not is_batch(plan.file)):  # the backend's set
        from evaltui.commands.set_remote import cancel_remote

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
    import json
    from collections import Counter

    from evaltui.sets.setdir import list_sets

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
