"""``evaltui report SET_DIR -o DIR``: a set as a static site (evaltui.report.setsite).

The set's table compares the members with the set file's baseline when it names one;
``--pivot AXIS`` adds the table with that axis over the columns. Exit codes as for a
run's report: 0 written, 2 bad input (not a set dir, an axis the set has not, an output
dir that is not a report without ``--force``); nothing is written on refusal.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from evaltui.commands.console import error, note
from evaltui.report.episodechoice import EpisodeChoiceError, parse_episode_choice
from evaltui.report.outdir import OutputDirError, check_output
from evaltui.report.setsite import write_set_report
from evaltui.sets.setdir import SetDirError, read_set
from evaltui.sets.table import build_table


def report_set(args: argparse.Namespace) -> int:
    started = time.monotonic()
    out = Path(args.output)
    set_path = Path(args.run_dir).expanduser().resolve()
    try:
        choice = parse_episode_choice(args.episodes)
        record = read_set(set_path)
        baseline = record.file.get("baseline")
        table = build_table(record, set_path.parent.parent,
                            baseline=baseline if isinstance(baseline, dict) and baseline
                            else None)
        if args.pivot is not None and args.pivot not in table.axes:
            raise ValueError(f"--pivot {args.pivot}: the set has no axis {args.pivot!r} "
                             f"(axes: {', '.join(table.axes)})")
        check_output(out, force=args.force, of=f"set {table.set_id}",
                     sources=[set_path, *(r.run_dir for r in table.rows if r.run_dir)])
        site = write_set_report(table, out, choice, pivot=args.pivot, force=args.force)
    except (SetDirError, EpisodeChoiceError, OutputDirError, ValueError) as exc:
        return error(str(exc))
    for line in site.skipped:
        note(line)
    print(f"report of set {table.set_id} ({len(table.rows)} members, {len(site.members)} "
          f"run reports, {len(site.plots)} plots) in {time.monotonic() - started:.1f} s -> "
          f"{out / 'index.html'}")
    return 0
