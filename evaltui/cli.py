"""The ``evaltui`` command: one sub-command per module under ``evaltui.commands``."""

from __future__ import annotations

import argparse
import sys

from evaltui import __version__
from evaltui.commands import eval as eval_cmd


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evaltui",
        description="Score agent graphs on benchmark splits: parallel simulator workers, "
        "GPU-budget admission, replayable per-episode logs.",
    )
    parser.add_argument("--version", action="version", version=f"evaltui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    eval_cmd.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
