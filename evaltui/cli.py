"""The ``evaltui`` command: one sub-command per module under ``evaltui.commands``."""

from __future__ import annotations

import argparse
import sys

from evaltui import __version__
from evaltui.commands import compare as compare_cmd
from evaltui.commands import demo as demo_cmd
from evaltui.commands import eval as eval_cmd
from evaltui.commands import open as open_cmd
from evaltui.commands import replay as replay_cmd
from evaltui.commands import run as run_cmd
from evaltui.commands import runs as runs_cmd
from evaltui.commands import serve as serve_cmd
from evaltui.commands import submit as submit_cmd
from evaltui.commands import teardown as teardown_cmd
from evaltui.commands import tui as tui_cmd
from evaltui.commands import verify as verify_cmd


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evaltui",
        description="Score agent graphs on benchmark splits: parallel simulator workers, "
        "GPU-budget admission, replayable per-episode logs.",
    )
    parser.add_argument("--version", action="version", version=f"evaltui {__version__}")
    tui_cmd.add_global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    eval_cmd.add_parser(sub)
    replay_cmd.add_parser(sub)
    open_cmd.add_parser(sub)
    compare_cmd.add_parser(sub)
    demo_cmd.add_parser(sub)
    serve_cmd.add_parser(sub)
    submit_cmd.add_parser(sub)
    runs_cmd.add_parsers(sub)
    run_cmd.add_parser(sub)
    teardown_cmd.add_parser(sub)
    verify_cmd.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        return tui_cmd.run(args)  # bare `evaltui`: the TUI
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
