"""``evaltui set watch FILE``: evaluate checkpoints as training writes them."""

from __future__ import annotations

import argparse


def add_parser(cmds: argparse._SubParsersAction) -> None:
    del cmds
