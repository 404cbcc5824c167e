"""``evaltui open RUN_DIR``: the TUI's run screen on one run dir, without a scheduler.

For a run dir copied from elsewhere, or one of a backend that is not running: the
metrics, the episode table and the replays all come from the files, and the screen
follows the dir live if a run is still writing to it.
"""

from __future__ import annotations

import argparse

from evaltui.commands.console import error
from evaltui.contract.records import EPISODES_DIRNAME, SPEC_FILENAME, SUMMARY_FILENAME
from evaltui.results.runrows import RunDirError, resolve_run_dir


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("open",
                       description="Open the TUI's run screen on a run dir (or a run id "
                       "under the outputs root): metrics, episodes and replays, read from "
                       "the files; no scheduler or API is started.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run dir, or a run id")
    # SUPPRESS: given after `open` they win, else the same options given before it stay.
    p.add_argument("--theme", default=argparse.SUPPRESS, help="TUI theme (default "
                   "evaltui-dark)")
    p.add_argument("--outputs", default=argparse.SUPPRESS,
                   help="outputs root for a run id (default $EVALTUI_OUTPUTS or ./outputs)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        run_dir = resolve_run_dir(args.run_dir, outputs=getattr(args, "outputs", None))
    except RunDirError as exc:
        return error(str(exc))
    if not any((run_dir / name).exists()
               for name in (SUMMARY_FILENAME, EPISODES_DIRNAME, SPEC_FILENAME)):
        return error(f"{run_dir} is not a run dir (no {SUMMARY_FILENAME}, "
                     f"{EPISODES_DIRNAME}/ or {SPEC_FILENAME})")
    # start-up: Textual (~1 s) loads once a screen opens: --help imports every command
    from evaltui.commands.tuiapp import open_app

    return open_app(getattr(args, "theme", None), run_dir=run_dir)
