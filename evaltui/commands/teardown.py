"""``evaltui teardown``: stop the backends that ``evaltui run`` started, by their pid files.

Only processes recorded in ``state_dir()/backends/*.pid`` whose create time still
matches are signalled (a reused PID is never hit); a backend that a running ``evaltui
run`` still uses is left alone unless ``--force``. Backends started by hand (``evaltui
serve``) have no pid file and are never touched. Runs keep running either way.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from evaltui.wrapper.backends import stop_backend
from evaltui.wrapper.pidfiles import pid_files, read_pid_file
from evaltui.wrapper.ports import in_use, port_lock


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("teardown",
                       description="Stop the backends `evaltui run` started (their pid files "
                       "in the state dir); runs keep running.")
    p.add_argument("--force", action="store_true",
                   help="also stop backends a running `evaltui run` still uses")
    p.add_argument("--grace", type=float, default=10.0,
                   help="seconds between SIGTERM and SIGKILL (default 10)")
    p.add_argument("--json", action="store_true", help="JSON output for scripts")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    results: list[dict[str, Any]] = []
    for path in pid_files():
        port = int(path.stem) if path.stem.isdigit() else None
        pid_file = read_pid_file(path)
        if pid_file is None or port is None:
            path.unlink(missing_ok=True)
            results.append({"port": port, "pid": None, "outcome": "unreadable pid file removed"})
            continue
        # The start lock keeps wrappers from starting or picking this backend meanwhile.
        with port_lock(port, "start"):
            if not pid_file.ref.alive():
                outcome = "not running (stale pid file removed)"
            elif in_use(port) and not args.force:
                results.append({"port": port, "pid": pid_file.pid,
                                "outcome": "in use by a running `evaltui run`: kept "
                                "(--force stops it)"})
                continue
            else:
                stop_backend(pid_file, args.grace)
                outcome = "stopped"
            path.unlink(missing_ok=True)
        results.append({"port": port, "pid": pid_file.pid, "outcome": outcome})
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    console = Console()
    if not results:
        console.print("no backends started by `evaltui run`")
        return 0
    table = Table(box=None, header_style="bold")
    for name in ("port", "pid", "outcome"):
        table.add_column(name)
    for r in results:
        table.add_row(str(r["port"]), str(r["pid"] or "-"), str(r["outcome"]))
    console.print(table)
    return 0
