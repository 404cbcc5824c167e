"""``evaltui set run|resume|cancel`` as clients of a backend's ``/sets`` routes.

With ``$BACKEND_URL`` (or ``--url``) the backend runs the set: ``set run FILE`` sends the
set file (its directory as ``base_dir``, so relative paths mean what they mean here),
the backend checks it as ``set run`` would (exit 2 and the one line naming the field),
holds the set dir and submits the members to its own queue; this command follows the
set through ``GET /sets/{id}`` with the same lines as a local run and ends with the
same table. Ctrl-C stops following only: the backend goes on with the set.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from evaltui.api.client import ApiClient, ApiError, InvalidRequest, NotFound
from evaltui.commands.console import error
from evaltui.commands.console import warning as say_warning
from evaltui.commands.set_drive import exit_code
from evaltui.commands.set_follow import FollowPrinter
from evaltui.commands.set_show import print_table
from evaltui.contract.setspec import (
    SET_FILENAME,
    MemberState,
    SetFileError,
    SetMemberRecord,
    SetRecord,
    load_set_file,
)
from evaltui.sets.runner import MemberLive, RunnerOptions
from evaltui.sets.setdir import SetDirError, read_set

POLL_SEC = 0.5


def set_ref(ref: str) -> str:
    """The set id a SET argument names: a set dir's name, else the id itself."""
    path = Path(ref).expanduser()
    return path.resolve().name if (path / SET_FILENAME).is_file() else ref


def run_remote(args: argparse.Namespace, kind: str, url: str, options: RunnerOptions) -> int:
    console = Console(stderr=True, soft_wrap=True)  # piped: lines whole, never folded
    with ApiClient(url) as client:
        try:
            if kind == "run":
                _setfile, data = load_set_file(Path(args.file))
                made = client.create_set(data, base_dir=Path(args.file).resolve().parent,
                                         retries=options.retries,
                                         retry_backoff=options.backoff_sec,
                                         max_error_rate=options.max_error_rate,
                                         max_parallel=options.max_parallel)
            else:
                made = client.resume_set(set_ref(args.set), retries=options.retries,
                                         max_error_rate=options.max_error_rate,
                                         max_parallel=options.max_parallel)
        except (SetFileError, InvalidRequest) as exc:
            return error(str(exc))
        except ApiError as exc:
            return error(str(exc), 1)
        for warning in made.get("warnings", []):
            say_warning(warning)
        set_id = made["set_id"]
        console.print(f"set [bold]{escape(set_id)}[/]: {len(made['members'])} members on "
                      f"{client.base_url} -> {made['set_dir']}", highlight=False)
        if args.detach:
            console.print(f"submitted; the backend runs the set (`evaltui set show {set_id}` "
                          "shows it)", highlight=False)
            return 0
        try:
            body = follow(client, set_id, console)
        except KeyboardInterrupt:
            console.print(f"stopped following; the backend goes on with the set "
                          f"(`evaltui set cancel {set_id}` stops it)")
            return 130
        except ApiError as exc:
            return error(str(exc), 1)
    return finish(body, args, console)


def follow(client: ApiClient, set_id: str, console: Console) -> dict[str, Any]:
    """Print the follow lines until the backend has settled the set; its last body."""
    printer = FollowPrinter(console, set_id)
    try:
        while True:
            body = client.get_set(set_id)
            printer([MemberLive(_member(m), note=m.get("error")) for m in body["members"]])
            if not body["running"]:
                return body
            time.sleep(POLL_SEC)
    finally:
        printer.close()


def finish(body: dict[str, Any], args: argparse.Namespace, console: Console) -> int:
    """The table (from the set dir when this machine can read it) and the exit code."""
    try:
        record = read_set(Path(body["set_dir"]))
    except SetDirError:  # a backend on another machine: its answer is all there is
        record = SetRecord(set_id=body["set_id"], name=body["name"], file={}, base_dir="",
                           members=[_member(m) for m in body["members"]])
        print(json.dumps({k: body[k] for k in ("set_id", "name", "members", "best",
                                               "baseline")}, indent=2))
    else:
        print_table(record, args, as_json=args.json)
    return exit_code(record, bool(body.get("held")), console)


def _member(m: dict[str, Any]) -> SetMemberRecord:
    state = m["state"] if m["state"] in MemberState.__members__.values() else "pending"
    return SetMemberRecord(key=m["key"], axes=m["axes"], run_id=m.get("run_id"),
                           state=MemberState(state), attempts=m.get("attempts", 0),
                           error=m.get("error"))


def cancel_remote(args: argparse.Namespace, url: str) -> int:
    with ApiClient(url) as client:
        try:
            answer = client.cancel_set(set_ref(args.set))
        except NotFound as exc:
            return error(str(exc))
        except ApiError as exc:
            return error(str(exc), 1)
    Console().print(f"set {answer['set_id']}: cancel asked of {answer['cancelled']} member "
                    "run(s)", highlight=False)
    return 0
