"""The TUI: ``evaltui`` over an embedded scheduler (or ``--attach``), and the screens of
``open``, ``replay`` and ``demo``.

The scheduler runs in this process (ticking in its own thread) and, when its port is
free, the HTTP API of ``evaltui serve`` is served beside it (loopback only), so scripts
and other clients can use this backend while the TUI is open. Runs are spawned in their
own sessions: quitting the TUI never kills them; the next backend adopts them. With
``--attach URL`` the TUI is instead a client of the backend at URL (AttachedBackend).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from evaltui.api.auth import TokenError
from evaltui.api.backend_start import start_backend
from evaltui.commands.console import error, warning
from evaltui.commands.startchecks import start_problem
from evaltui.rundir.layout import outputs_root
from evaltui.scheduler.cluster.probe import ClusterUnavailable, open_cluster
from evaltui.scheduler.scheduler import JobScheduler
from evaltui.tui.app import make_app
from evaltui.tui.attached import AttachedBackend
from evaltui.tui.backend import BackendError
from evaltui.tui.embedded import EmbeddedBackend
from evaltui.tui.themes import DEFAULT_THEME, ThemeError


def run(args: argparse.Namespace) -> int:
    """Open the TUI; returns the process exit code."""
    if getattr(args, "attach", None):
        return _attach(args)
    # Said in one line before the screen is taken over.
    problem = start_problem("--api-port", args.api_port, "0: no API", args.outputs)
    if problem is not None:
        return error(problem)
    try:
        probe = open_cluster(args.ray) if getattr(args, "ray", None) else None
    except ClusterUnavailable as exc:
        return error(str(exc))
    scheduler = JobScheduler(outputs_root(args.outputs), gpu_probe=probe)
    backend = EmbeddedBackend(scheduler)
    services = ExitStack()

    def start_api() -> None:
        backend.api_note = serve_api(scheduler, args.api_port, services)

    return run_app(backend, args.theme, before_run=start_api, services=services)


def serve_api(scheduler: Any, port: int, stack: ExitStack) -> str:
    """Serve the HTTP API on 127.0.0.1:``port`` until ``stack`` closes; say how it went.

    A busy port (another backend runs) is not an error: the TUI still works, and the
    header says where the API is not.
    """
    if port == 0:
        return "API: off (--api-port 0)"
    try:
        served = start_backend(scheduler, port=port)
    except TokenError as exc:
        return f"API: off ({exc})"
    except (OSError, RuntimeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        return f"API: not served, 127.0.0.1:{port} is busy ({reason})"
    stack.callback(served.stop)
    return f"API: {served.url}"


def run_app(backend: Any, theme: str | None, before_run: Callable[[], None] | None = None,
            services: ExitStack | None = None) -> int:
    """Start ``backend``, then ``before_run``, run the app; however the app ends, close
    ``services`` (e.g. the API server) and then stop the backend."""
    try:
        app = make_app(backend, theme=theme or DEFAULT_THEME)
    except ThemeError as exc:
        return error(str(exc))
    for problem in app.theme_problems:  # also notified in the app; this stays in scrollback
        warning(problem)
    backend.start()
    try:
        if before_run is not None:
            before_run()
        app.run()
    finally:
        if services is not None:
            services.close()
        backend.stop()
    return 0


def open_app(theme: str | None, **files: Path) -> int:
    """The app without a backend, on ``run_dir`` (``evaltui open``) or ``replay_dir``."""
    try:
        app = make_app(theme=theme or DEFAULT_THEME, **files)
    except ThemeError as exc:
        return error(str(exc))
    app.run()
    return 0


def _attach(args: argparse.Namespace) -> int:
    """The TUI over ``evaltui serve`` at ``--attach URL``: no scheduler, no API here.

    A backend that does not answer or rejects the token is one line on stderr and exit
    code 1, before the screen is taken over.
    """
    try:
        backend = AttachedBackend(args.attach)
    except BackendError as exc:
        return error(str(exc), 1)
    try:
        return run_app(backend, args.theme)
    except BackendError as exc:  # raised by backend.start(): nothing was shown yet
        return error(str(exc), 1)
    finally:
        backend.stop()
