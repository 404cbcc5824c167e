"""``evaltui report RUN_DIR -o DIR``: a run as a static site that opens in any browser.

Exit codes: 0 written, 2 bad input (not a run dir, a bad ``--episodes``, an output dir
that exists and is not a report without ``--force``); nothing is written on refusal.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from evaltui.commands.console import error, note
from evaltui.commands.refs import RefError, add_outputs_option, resolve_run_or_set
from evaltui.commands.report_set import report_set
from evaltui.report.build import write_run_report
from evaltui.report.episodechoice import EpisodeChoiceError, parse_episode_choice
from evaltui.report.outdir import OutputDirError, check_output
from evaltui.results.runrows import RunDirError
from evaltui.runview.snapshot import read_snapshot


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        description="Write RUN_DIR as a static site in DIR: the run's header, metrics with "
        "95% CIs and n, plots, a sortable and searchable episode table, and a page per "
        "episode with its frames and firing log. No server and nothing fetched: copy DIR "
        "anywhere and open DIR/index.html.")
    p.add_argument("run_dir", metavar="RUN_OR_SET", help="a run dir or run id "
                   "(outputs/eval_runs/RUN_ID), or a set dir or set id "
                   "(outputs/eval_sets/SET_ID: the set's table, plots and every member's "
                   "report)")
    add_outputs_option(p)
    p.add_argument("-o", "--output", "--out", metavar="DIR", required=True,
                   help="where to write the site (this run's or set's earlier report there "
                   "is replaced; another's only with --force)")
    p.add_argument("--episodes", metavar="WHICH", default=None,
                   help="which episodes get a page: all (default), none, or indices, "
                   "ranges and statuses, e.g. 0-19,error")
    p.add_argument("--pivot", metavar="AXIS", help="a set: also its table with this axis "
                   "spread over the columns")
    p.add_argument("--force", action="store_true",
                   help="replace DIR even if it exists and is not a report")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        kind, path = resolve_run_or_set(args.run_dir, args.outputs)
    except RefError as exc:
        return error(str(exc))
    args.run_dir = str(path)
    if kind == "set":
        return report_set(args)
    if args.pivot is not None:
        return error("--pivot is for a set dir")
    started = time.monotonic()
    out = Path(args.output)
    try:
        choice = parse_episode_choice(args.episodes)
        snap = read_snapshot(Path(args.run_dir).expanduser())
        check_output(out, force=args.force, sources=[Path(args.run_dir)],
                     of=f"run {snap.run_id}")
        site = write_run_report(snap, out, choice, force=args.force)
    except (RunDirError, EpisodeChoiceError, OutputDirError) as exc:
        return error(str(exc))
    for line in snap.notes():
        note(line)
    print(f"report of run {snap.run_id} ({snap.state.value}, {len(snap.rows)} episodes, "
          f"{len(site.pages)} episode pages) in {time.monotonic() - started:.1f} s -> "
          f"{out / 'index.html'}")
    return 0
