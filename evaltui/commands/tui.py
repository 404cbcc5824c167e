"""``evaltui`` with no sub-command: its options, which every command takes before its name.

The TUI itself is :mod:`evaltui.commands.tuiapp`, imported only when it opens.
"""

from __future__ import annotations

import argparse

DEFAULT_API_PORT = 8000


def add_global_options(parser: argparse.ArgumentParser) -> None:
    """Options of the bare ``evaltui`` command (the TUI)."""
    parser.add_argument("--theme", default=None, help="evaltui-dark (default), evaltui-light, "
                        "evaltui-high-contrast, a theme file's name from the config dir's "
                        "themes/ (~/.config/evaltui/themes/*.toml), or any Textual theme name")
    parser.add_argument("--attach", metavar="URL", default=None,
                        help="run the TUI against a running `evaltui serve` at URL (no scheduler "
                        "or API in this process; token from $EVALTUI_TOKEN or the token "
                        "file)")
    parser.add_argument("--outputs", default=None,
                        help="outputs root (default $EVALTUI_OUTPUTS or ./outputs)")
    parser.add_argument("--ray", metavar="ADDRESS", default=None,
                        help="admit runs onto the GPUs of this Ray cluster's nodes "
                        "(see evaltui serve --ray)")
    parser.add_argument("--api-port", type=int, default=DEFAULT_API_PORT,
                        help=f"serve the HTTP API on 127.0.0.1:PORT beside the TUI (default "
                        f"{DEFAULT_API_PORT}; 0 = do not serve it)")


def run(args: argparse.Namespace) -> int:
    """Open the TUI; returns the process exit code."""
    # start-up: the TUI's imports (Textual, the scheduler, the API: ~1.5 s) wait until it
    # opens; evaltui.cli imports this module for the global options of every command
    from evaltui.commands import tuiapp

    return tuiapp.run(args)
