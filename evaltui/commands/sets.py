"""``evaltui set run|show|ls|cancel|resume|watch``: experiment sets (docs/architecture.md).

``set run FILE`` checks the whole set file (exit 2 and one line naming the field, nothing
written), writes the set dir, submits the members to ``$BACKEND_URL`` or, without one,
to a scheduler embedded in this process, follows them and prints the set's table. Run
again, it continues where it stopped. Exit codes as ``evaltui eval``'s: 0 every member
done within its error allowance, 1 a member failed (after its retries) or was held back,
2 a bad set file or set reference, 130 Ctrl-C or a cancelled member.

This module is the parser alone: each sub-command's module (set_run, set_show,
set_watch) is imported when that sub-command runs (:func:`evaltui.commands.console.handler`),
so ``set ls`` does not load the scheduler ``set run`` embeds.
"""

from __future__ import annotations

import argparse

from evaltui.commands.console import handler
from evaltui.commands.eval import add_slurm_arguments
from evaltui.contract.setspec import DEFAULT_ARRAY_PARALLELISM
from evaltui.engine.executor.kinds import EXECUTORS

SHOW_FORMATS = ("md", "latex", "csv", "json")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("set",
                       description="Run, follow and tabulate experiment sets (a set file's "
                       "matrix of graphs, splits, params, repeats and checkpoints).")
    cmds = p.add_subparsers(dest="set_command", metavar="SUBCOMMAND", required=True)
    run = cmds.add_parser("run", help="submit a set file's members, follow them, print the "
                          "table (again: continue where it stopped)")
    run.add_argument("file", help="the set file (YAML or JSON)")
    runner_arguments(run)
    run.set_defaults(func=handler("set_run", "runner_command"))
    resume = cmds.add_parser("resume", help="continue a set from its set.json: resume "
                             "incomplete members, retry failed ones")
    resume.add_argument("set", help="set dir or set id")
    runner_arguments(resume)
    resume.set_defaults(func=handler("set_run", "runner_command"))
    cancel = cmds.add_parser("cancel", help="cancel every queued or running member")
    cancel.add_argument("set", help="set dir or set id")
    common_arguments(cancel)
    cancel.set_defaults(func=handler("set_run", "cancel_set"))
    ls = cmds.add_parser("ls", help="the sets under the outputs root")
    common_arguments(ls)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=handler("set_show", "list_sets_command"))
    p = cmds.add_parser("show", help="the set's table (read from the run dirs, no backend)")
    p.add_argument("set", help="set dir or set id")
    p.add_argument("--outputs", help="outputs root (default $EVALTUI_OUTPUTS or ./outputs)")
    p.add_argument("--pivot", metavar="AXIS", help="spread this axis over the columns")
    p.add_argument("--baseline", nargs="?", const="", default=None, metavar="AXIS=VALUE,...",
                   help="compare each member with the baseline (default: the set file's)")
    p.add_argument("--format", choices=SHOW_FORMATS, help="md, latex, csv or json (default: a "
                   "table on the terminal)")
    p.add_argument("--metrics", help="metrics to show, comma separated (default: all; on "
                   "a terminal, as many as fit its width, the rest named under the table)")
    p.add_argument("--digits", type=int, default=3)
    p.add_argument("--by", metavar="FIELD", help="each member by an episode-row field, one "
                   "more axis (default: the benchmark's, task for metaworld; none: no groups)")
    p.set_defaults(func=handler("set_show", "show_set"))
    p = cmds.add_parser("watch", help="evaluate checkpoints as training writes them")
    p.add_argument("file", help="a set file whose checkpoint axis names a directory (watch)")
    runner_arguments(p)
    p.add_argument("--until", type=int, metavar="N", help="end after N checkpoints")
    p.add_argument("--settle", type=float, default=2.0, metavar="SEC",
                   help="a checkpoint without a .done sidecar is complete once unchanged "
                   "this long (default 2)")
    p.set_defaults(func=handler("set_watch", "watch_command"))


def common_arguments(p: argparse.ArgumentParser) -> None:
    """``--outputs`` and ``--url``, which every ``set`` command that finds a set takes."""
    p.add_argument("--outputs", help="outputs root (default $EVALTUI_OUTPUTS or ./outputs)")
    p.add_argument("--url", help="backend URL (default $BACKEND_URL; unset: an embedded "
                   "scheduler)")


def runner_arguments(p: argparse.ArgumentParser) -> None:
    """The options of a command that drives a set (run, resume, watch)."""
    common_arguments(p)
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
    slurm_options(p)


def slurm_options(p: argparse.ArgumentParser) -> None:
    """``--executor`` and the ``--slurm-*`` options of ``set run``/``resume``."""
    p.add_argument("--executor", choices=[k.name for k in EXECUTORS.values() if k.batch],
                   default=None,
                   help="run the members as Slurm job arrays (as base.executor: slurm)")
    add_slurm_arguments(p)
    p.add_argument("--slurm-array-parallelism", type=int, default=None, metavar="P",
                   help="--executor slurm: members running at once (default: "
                   f"base.slurm_array_parallelism, else {DEFAULT_ARRAY_PARALLELISM})")
