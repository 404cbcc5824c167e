"""``evaltui verify RUN_DIR``: recompute a run's metrics from its trajectories (and replay).

Exit codes: 0 everything agrees within the tolerance, 1 something differs (a metric, a
mean, a CI, an n, or with ``--replay`` a step), 2 the path is not a verifiable run dir.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from evaltui.commands.console import error
from evaltui.results.replaycheck import ReplayReport, replay_run
from evaltui.results.runrows import RunDirError, resolve_run_dir
from evaltui.results.verify import (
    DEFAULT_TOLERANCE,
    VerifyInputError,
    VerifyReport,
    load_episode_dirs,
    verify_run,
)
from evaltui.rundir.layout import is_run_id

MISMATCHES_SHOWN = 50
"""Text output lists this many mismatches; ``--json`` lists them all."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verify",
        description="Recompute every per-episode metric from each episode's trajectory.json, "
        "then the run means, 95% CIs and n, and compare them with episode.json and "
        "summary.json. Exit 0 when all agree within the tolerance, 1 when not, 2 when "
        "RUN_DIR is not a verifiable run dir.")
    p.add_argument("run_dir", metavar="RUN", help="a run dir, or a run id under the outputs "
                   "root (outputs/eval_runs/RUN_ID)")
    p.add_argument("--outputs", help="outputs root a run id is looked up in (default "
                   "$EVALTUI_OUTPUTS or ./outputs)")
    p.add_argument("--replay", action="store_true",
                   help="also re-run each episode's logged actions in a fresh env (BabyAI) "
                   "and check rewards, done flags and positions step by step")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                   help=f"largest absolute difference accepted (default {DEFAULT_TOLERANCE:g})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.tolerance >= 0:
        return error(f"--tolerance must be >= 0, got {args.tolerance}")
    run_dir = Path(args.run_dir).expanduser()
    if not run_dir.is_dir() and is_run_id(args.run_dir):  # a run id: under the outputs root
        try:
            run_dir = resolve_run_dir(args.run_dir, outputs=args.outputs)
        except RunDirError as exc:
            return error(str(exc))
    try:
        report = verify_run(run_dir, args.tolerance)
        replay = None
        if args.replay:
            replay = replay_run(run_dir, load_episode_dirs(run_dir), args.tolerance)
    except VerifyInputError as exc:
        return error(str(exc))
    ok = report.ok and (replay is None or replay.ok)
    if args.json:
        out = {**report.to_json(), "replay": None if replay is None else replay.to_json(),
               "ok": ok}
        print(json.dumps(out, indent=2, default=str))
    else:
        print_report(report)
        if replay is not None:
            print_replay(replay)
    return 0 if ok else 1


def print_report(report: VerifyReport) -> None:
    print(f"verified {report.episodes_checked} episodes of {report.run_dir}: "
          f"{report.values_compared} values compared, tolerance {report.tolerance:g}")
    if report.max_diff == 0:
        print("largest absolute difference: 0 (every compared number is identical)")
    else:
        print(f"largest absolute difference: {report.max_diff:.3g} at {report.max_where}")
    if report.ok:
        print("OK: every metric, mean, CI and n agrees with its recomputation")
        return
    n = len(report.mismatches)
    print(f"MISMATCH: {n} value{'s differ' if n != 1 else ' differs'} above {report.tolerance:g}")
    for m in report.mismatches[:MISMATCHES_SHOWN]:
        diff = "" if m.diff is None else f" (diff {m.diff:.3g})"
        print(f"  {m.where} {m.field} {m.metric}: stored {m.stored!r}, "
              f"recomputed {m.recomputed!r}{diff}")
    if len(report.mismatches) > MISMATCHES_SHOWN:
        print(f"  ... and {len(report.mismatches) - MISMATCHES_SHOWN} more (--json lists all)")


def print_replay(replay: ReplayReport) -> None:
    if replay.unsupported:
        print(f"replay: skipped: {replay.unsupported}")
        return
    print(f"replay: {replay.episodes_replayed} episodes, {replay.steps_replayed} steps re-run")
    if replay.ok:
        print("OK: rewards, done flags and positions match the logs and trajectories")
        return
    print(f"DIVERGED: {len(replay.divergences)} episodes")
    for d in replay.divergences[:MISMATCHES_SHOWN]:
        print(f"  {d.episode} step {d.step}: {d.what}")
