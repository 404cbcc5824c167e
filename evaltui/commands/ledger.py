"""``evaltui ledger setup | where``: the machine-wide reservation ledger (DESIGN §12).

``setup`` (as root) makes the directory every Unix user's schedulers share
(scheduler/admission/ledgerdir.py): root-owned, its group ``evaltui`` (made if missing), mode
3770 (sticky: each user writes only their own file) and its lock owned by root.
``where`` says which ledger this user's schedulers use, and why.
"""

from __future__ import annotations

import argparse
import grp
import subprocess
from pathlib import Path

from evaltui.commands.console import error
from evaltui.scheduler.admission.ledgerdir import (
    DEFAULT_GROUP,
    SHARED_LEDGER_DIR,
    ledger_place,
    setup_shared_dir,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ledger",
                       description="The reservation ledger shared by every user's "
                       "schedulers on this machine.")
    actions = p.add_subparsers(dest="ledger_action", metavar="ACTION", required=True)
    setup = actions.add_parser("setup", help="make the shared ledger directory (root)",
                               description="Make the machine-wide ledger directory: owned "
                               "by root and GROUP, mode 3770 (each user writes only their "
                               "own file). Users of GROUP then share their reservations.")
    setup.add_argument("--dir", type=Path, default=SHARED_LEDGER_DIR,
                       help=f"where (default {SHARED_LEDGER_DIR}; others need "
                       "EVALTUI_LEDGER_DIR set to it)")
    setup.add_argument("--group", default=DEFAULT_GROUP,
                       help=f"the group whose users share it (default {DEFAULT_GROUP}, "
                       "made if missing)")
    setup.set_defaults(func=run_setup)
    where = actions.add_parser("where", help="which ledger this user's schedulers use")
    where.set_defaults(func=run_where)


def run_setup(args: argparse.Namespace) -> int:
    try:
        grp.getgrnam(args.group)
    except KeyError:
        if args.group != DEFAULT_GROUP:
            return error(f"no group {args.group!r}")
        made = subprocess.run(["groupadd", "--system", args.group], capture_output=True,
                              text=True)
        if made.returncode != 0:
            return error(f"cannot make group {args.group}: "
                         f"{made.stderr.strip() or made.returncode}")
    try:
        print(setup_shared_dir(args.dir, args.group))
    except (PermissionError, KeyError, OSError) as exc:
        return error(str(exc))
    return 0


def run_where(args: argparse.Namespace) -> int:
    place = ledger_place()
    print(f"{place.directory} ({'machine-wide' if place.shared else 'per-user'})")
    if place.note:
        print(place.note)
    return 0
