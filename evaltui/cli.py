"""The ``evaltui`` command: one sub-command per module under ``evaltui.commands``.

Only the invoked command's module is imported: the modules pull in what their command
needs (numpy, pydantic, httpx, rich tables, Textual...), ~0.5 s when all are loaded, and
``evaltui eval`` pays that before it can start its run. With no command on the line
(bare ``evaltui``, ``--help``, a typo), every module is loaded, so help and "invalid
choice" errors list them all.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterable, Sequence

from evaltui import __version__
from evaltui.commands import tui as tui_cmd
from evaltui.commands.console import error
from evaltui.engine.processes.quickexit import exit_now
from evaltui.rundir.errors import StateDirError

# Module -> the sub-commands it adds (``add_parser``, or ``add_parsers`` for several),
# in the order ``evaltui --help`` lists them.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "eval": ("eval",),
    "replay": ("replay",),
    "open": ("open",),
    "compare": ("compare",),
    "race": ("race",),
    "demo": ("demo",),
    "serve": ("serve",),
    "serve_policy": ("serve-policy",),
    "submit": ("submit",),
    "runs": ("ls", "show", "cancel", "resume", "logs"),
    "run": ("run",),
    "teardown": ("teardown",),
    "verify": ("verify",),
    "report": ("report",),
    "export": ("export",),
    "gpus": ("gpus",),
    "sets": ("set",),
    "ledger": ("ledger",),
}
MODULE_OF = {command: module for module, commands in COMMAND_MODULES.items()
             for command in commands}
QUICK_EXIT_COMMANDS = frozenset({"eval"})
"""Commands that, as the program, end without the interpreter's teardown (~0.1 s they
would add after their run has ended; they close every file they write)."""


def build_parser(modules: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The parser with the sub-commands of ``modules`` (default: all of them)."""
    wanted = set(COMMAND_MODULES if modules is None else modules)
    parser = argparse.ArgumentParser(
        prog="evaltui",
        description="Score agent graphs on benchmark splits: parallel simulator workers, "
        "GPU-budget admission, replayable per-episode logs.",
    )
    parser.add_argument("--version", action="version", version=f"evaltui {__version__}")
    tui_cmd.add_global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, commands in COMMAND_MODULES.items():
        if name not in wanted:
            continue
        module = importlib.import_module(f"evaltui.commands.{name}")
        adder = module.add_parsers if len(commands) > 1 else module.add_parser
        adder(sub)
    return parser


def invoked_command(argv: Sequence[str]) -> str | None:
    """The sub-command named on ``argv`` (its first word that is not a global option or
    an option's value), or None if that word is no command."""
    takes_value = _global_options_with_values()
    skip = False
    for token in argv:
        if skip:
            skip = False
            continue
        if token == "--":
            return None
        if token.startswith("-"):
            skip = "=" not in token and token in takes_value
            continue
        return token if token in MODULE_OF else None
    return None


def _global_options_with_values() -> set[str]:
    probe = argparse.ArgumentParser(add_help=False)
    tui_cmd.add_global_options(probe)
    return {flag for action in probe._actions if action.nargs != 0
            for flag in action.option_strings}


def main(argv: list[str] | None = None) -> int:
    """Run the command on ``argv``; without ``argv`` (the program itself) the command line's,
    and a QUICK_EXIT_COMMANDS command then ends the process itself."""
    args_in = sys.argv[1:] if argv is None else argv
    command = invoked_command(args_in)
    parser = build_parser(None if command is None else [MODULE_OF[command]])
    args = parser.parse_args(args_in)
    if not getattr(args, "func", None):
        return tui_cmd.run(args)  # bare `evaltui`: the TUI
    try:
        code = int(args.func(args))
    except StateDirError as exc:  # a bad EVALTUI_STATE_DIR: one line, whichever command
        return error(exc.strerror)
    if argv is None and command in QUICK_EXIT_COMMANDS:
        exit_now(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
