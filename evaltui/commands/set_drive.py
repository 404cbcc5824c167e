"""Driving a set from this process, for ``evaltui set run|resume|watch``: their options,
``drive`` (hold the set dir, open the target, run or watch the set, print its table) and
the exit code of a settled set, which ``set run`` against a backend ends with too.
"""

from __future__ import annotations

import argparse
import shutil
from typing import Any

from rich.console import Console
from rich.markup import escape

from evaltui.api.settarget import open_target
from evaltui.commands.console import FAILED, error
from evaltui.commands.set_follow import FollowPrinter
from evaltui.commands.set_show import print_table
from evaltui.contract.setspec import MemberState, SetFileError, SetRecord, member_label
from evaltui.rundir.summaryfile import read_summary_header
from evaltui.sets.runner import RunnerOptions, SetRunner
from evaltui.sets.setdir import SetBusy, hold_set
from evaltui.sets.table import member_run_dir
from evaltui.sets.targets import SubmitRefused, TargetError


def runner_options(args: argparse.Namespace) -> RunnerOptions:
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


def drive(plan: Any, args: argparse.Namespace, options: RunnerOptions, console: Console,
          watch: Any = None) -> int:
    """Hold the set dir, open the target, run (or watch) the set, print its table."""
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
    print_table(record, args, as_json=args.json)
    return 130 if interrupted else exit_code(record, runner.held, console)


def exit_code(record: SetRecord, held: bool, console: Console) -> int:
    """eval's codes over the members: 1 any failed/aborted/held, 130 any cancelled, 1 a
    done member over its episode error allowance, else 0."""
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
    for m in record.members:
        run_dir = member_run_dir(m, None)
        summary = read_summary_header(run_dir) if run_dir else None
        if summary is not None and summary.error_rate_exceeded:
            return error(f"{member_label(m.axes)}: {summary.error_count} episodes "
                         f"errored (allowed: {summary.max_error_rate or 0:.0%})", FAILED)
    return 0
