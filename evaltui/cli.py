"""The ``evaltui`` command: one sub-command per module under ``evaltui.commands``.

Only the invoked command's module is imported: the modules pull in what their command
needs (numpy, pydantic, httpx, rich tables, Textual, the scheduler...), seconds when all
are loaded, and ``evaltui eval`` pays its own before it can start its run. With no command
on the line (bare ``evaltui``, ``--help``, a typo), no module is loaded: the commands are
listed from :data:`COMMANDS`, the one place their one-line summaries are written.
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

COMMANDS: dict[str, tuple[tuple[str, str], ...]] = {
    "eval": (("eval", "run one eval in the foreground (progress bar, results)"),),
    "replay": (("replay", "replay one episode dir step by step (TUI)"),),
    "open": (("open", "open the run screen on a run dir (TUI, no scheduler)"),),
    "compare": (("compare", "paired comparison of two runs on the same episodes"),),
    "race": (("race", "two graphs on the same episodes, stopped when the paired difference "
              "is decided (anytime-valid)"),),
    "demo": (("demo", "the TUI with the built-in benchmark queued (no GPU needed)"),),
    "serve": (("serve", "headless scheduler + HTTP API"),),
    "serve_policy": (("serve-policy", "serve a model over openpi's websocket protocol"),),
    "submit": (("submit", "queue an eval on a backend (evaltui serve)"),),
    "runs": (("ls", "list runs of a backend"),
             ("show", "one run: state, record, metrics"),
             ("cancel", "cancel queued or running runs"),
             ("resume", "re-run what is not ok of finished runs"),
             ("logs", "an episode's log (log.jsonl)")),
    "run": (("run", "run a command once admitted (GPU budget, no OOM)"),),
    "teardown": (("teardown", "stop the backends `evaltui run` started"),),
    "verify": (("verify", "recompute a run's metrics from its stored trajectories"),),
    "report": (("report", "write a run's static report (index.html; opens from file://)"),),
    "export": (("export", "export a run to W&B, MLflow or TensorBoard"),),
    "gpus": (("gpus", "who holds each GPU's memory: pid, user, MiB, run"),),
    "sets": (("set", "experiment sets: a grid of runs as one unit"),),
    "ledger": (("ledger", "the machine-wide reservation ledger"),),
}
"""Module -> the sub-commands it adds (``add_parser``, or ``add_parsers`` for several) and
each one's line in ``evaltui --help``, in the order it lists them."""
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    module: tuple(name for name, _ in commands) for module, commands in COMMANDS.items()}
MODULE_OF = {command: module for module, commands in COMMAND_MODULES.items()
             for command in commands}
QUICK_EXIT_COMMANDS = frozenset({"eval"})
"""Commands that, as the program, end without the interpreter's teardown (~0.1 s they
would add after their run has ended; they close every file they write)."""


def build_parser(modules: Iterable[str] | None = None, *,
                 listing: bool = False) -> argparse.ArgumentParser:
    """The parser with the sub-commands of ``modules`` (default: all of them); ``listing``:
    every command by name and summary alone, no module imported (help, a typo)."""
    wanted = set(COMMAND_MODULES if modules is None else modules)
    parser = argparse.ArgumentParser(
        prog="evaltui",
        description="Score agent graphs on benchmark splits: parallel simulator workers, "
        "GPU-budget admission, replayable per-episode logs.",
    )
    parser.add_argument("--version", action="version", version=f"evaltui {__version__}")
    tui_cmd.add_global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, commands in COMMANDS.items():
        if listing:
            for command, summary in commands:
                sub.add_parser(command, help=summary, add_help=False)
            continue
        if name not in wanted:
            continue
        module = importlib.import_module(f"evaltui.commands.{name}")
        before = set(sub.choices)
        (module.add_parsers if len(commands) > 1 else module.add_parser)(sub)
        for action in sub._choices_actions:  # the summaries are written here alone
            if action.dest not in before:
                action.help = dict(commands)[action.dest]
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
    parser = build_parser([] if command is None else [MODULE_OF[command]],
                          listing=command is None)
    if command is None:
        args, unknown = parser.parse_known_args(args_in)
        if args.command is not None:  # a command only argparse found (``--them light eval``)
            args = build_parser([MODULE_OF[args.command]]).parse_args(args_in)
        elif unknown:
            parser.parse_args(args_in)  # argparse's own error
    else:
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
