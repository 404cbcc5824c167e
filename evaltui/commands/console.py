"""How every ``evaltui`` command speaks to its user: one prefix style, one set of codes.

A message is one line on stderr, ``error: ...``, ``warning: ...`` or ``note: ...`` (the
word coloured on a terminal, nothing else added: the command's name is already on the
user's line), never re-wrapped, with Rich markup in it escaped. The exit codes are the
same for the same kind of mistake in every command (the table is in docs/cli.md):

=====  ====================================================================
0      done
1      it ran and failed: a failed run or member, a backend that is down or
       refused, a tracker that failed
2      the input is wrong: a bad option or file, an unknown run or set id, a
       path that is not a run dir or a set dir, an output dir it will not
       replace
130    interrupted (Ctrl-C) or cancelled
=====  ====================================================================
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

OK = 0
FAILED = 1
USAGE = 2
INTERRUPTED = 130

_STYLE = {"error": "bold red", "warning": "yellow", "note": "dim"}


def say(kind: str, message: str) -> None:
    """``kind: message`` on stderr, on one line however narrow the terminal."""
    # start-up: Rich on first use: every command imports this module, and `evaltui eval`
    # starts its run process before anything heavy is imported
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, soft_wrap=True, highlight=False).print(
        f"[{_STYLE[kind]}]{kind}[/]: {escape(str(message))}")


def error(message: str, code: int = USAGE) -> int:
    """Say ``error: message``; returns ``code`` (2, an input error, unless told)."""
    say("error", message)
    return code


def warning(message: str) -> None:
    say("warning", message)


def note(message: str) -> None:
    say("note", message)


def handler(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """Sub-command ``name`` of ``evaltui.commands.MODULE``, that module imported when the
    sub-command runs: a command with several sub-commands loads only the one it runs, as
    ``evaltui`` loads only the command it runs (cli.py)."""

    def run(args: argparse.Namespace) -> int:
        return int(getattr(importlib.import_module(f"evaltui.commands.{module}"), name)(args))

    return run
