"""``evaltui serve``: the headless backend, a JobScheduler behind the HTTP API (DESIGN §7).

Loopback only unless ``--host`` names another address *and* ``--token-file`` is given
(an explicit token, so that exposing the API is never an accident). SIGTERM or Ctrl-C
stops the API (event streams end, requests in flight finish), then the admit queue and
the scheduler's loop; runs keep running in their own sessions, and the next backend
adopts them.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from evaltui.api.auth import TokenError, load_or_create_token, token_path
from evaltui.api.backend_start import start_backend
from evaltui.api.server import is_loopback
from evaltui.commands.console import FAILED, error
from evaltui.commands.startchecks import start_problem
from evaltui.rundir.layout import outputs_root
from evaltui.scheduler.cluster.probe import ClusterUnavailable, open_cluster
from evaltui.scheduler.scheduler import JobScheduler

DEFAULT_PORT = 8000


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve",
                       description="Run the scheduler headless and serve its HTTP API "
                       "(/api/eval/v2, OpenAPI at /openapi.json).")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; anything but loopback "
                   "needs --token-file)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--outputs", help="outputs root (default $EVALTUI_OUTPUTS or ./outputs)")
    p.add_argument("--token-file", type=Path, default=None,
                   help="bearer token file (created 0600 if missing; default: the state "
                   "dir's `token`)")
    p.add_argument("--max-body-mb", type=float, default=1.0,
                   help="largest request body accepted (default 1 MiB)")
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="admit runs onto the GPUs of this Ray cluster's nodes (measured per "
                   "node, reserved in a cluster-wide ledger); runs use executor ray")
    p.add_argument("--log-level", default="warning",
                   choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    problem = start_problem("--port", args.port, "0 picks a free one", args.outputs)
    if problem is not None:
        return error(problem)
    if not is_loopback(args.host) and args.token_file is None:
        return error(f"refusing to listen on {args.host} without --token-file: the API can "
                     "start and cancel runs; pass a token file (created 0600 if missing) that "
                     "remote clients send as a bearer token")
    try:
        token = load_or_create_token(args.token_file)
    except TokenError as exc:
        return error(str(exc))
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _serve(args, token, args.token_file or token_path(), stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _serve(args: argparse.Namespace, token: str, token_file: Path,
           stop: threading.Event) -> int:
    try:
        probe = open_cluster(args.ray) if args.ray else None
    except ClusterUnavailable as exc:
        return error(str(exc))
    scheduler = JobScheduler(outputs_root(args.outputs), gpu_probe=probe)
    scheduler.start()
    try:
        try:
            served = start_backend(scheduler, host=args.host, port=args.port, token=token,
                                   max_body_bytes=int(args.max_body_mb * (1 << 20)),
                                   log_level=args.log_level)
        except (OSError, RuntimeError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            return error(f"cannot listen on {args.host}:{args.port}: {reason}", FAILED)
        with served:
            # One line scripts can wait for (the port matters when --port 0).
            print(f"evaltui serve: listening on {served.url} (outputs {scheduler.outputs}; "
                  f"token file {token_file})", flush=True)
            while not stop.wait(0.5):
                pass
            print("evaltui serve: stopping (runs keep running)", file=sys.stderr, flush=True)
    finally:
        scheduler.stop()
    return 0
