"""Backends that ``evaltui run`` finds or brings up on its port pool (ports.py), and stops.

``evaltui run`` needs a backend to queue its admit entry. It walks the pool (8765-8769,
or ``$EVALTUI_PORT_POOL``) and for each port, under that port's *start* lock (so two
wrappers never both start one): uses the evaltui backend answering there if it accepts
our token, starts one there if the port is free, or moves on if the port belongs to
something else (another program, another user's backend).

A backend it starts runs detached (its own session, log in
``state_dir()/backends/{port}.log``) and stays up for the next wrappers; its pid file
``state_dir()/backends/{port}.pid`` records the PID and create time, so ``evaltui
teardown`` stops exactly those, never a reused PID. Each wrapper holds the port's *use*
lock (shared) while it runs, so teardown can tell a backend still in use.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from evaltui.api.auth import TokenError, read_token
from evaltui.api.models import API_PREFIX
from evaltui.contract.pidref import PidRef
from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.rundir.layout import PRIVATE_MODE
from evaltui.wrapper.pidfiles import PidFile, backends_dir, pid_file_path
from evaltui.wrapper.ports import HOST, bindable, port_lock, port_pool, use_lock


class BackendStartError(RuntimeError):
    """No backend could be used or started; the message says why for each port."""


@dataclass
class BackendLease:
    """A backend in use by this wrapper; ``close`` drops the port's use lock."""

    port: int
    url: str
    started: bool
    _fd: int | None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def acquire_backend(outputs: Path, pool: list[int] | None = None,
                    say: Callable[[str], None] = lambda _m: None,
                    start_timeout: float = 60.0) -> BackendLease:
    """A backend of ours on the first usable port of the pool, started if needed."""
    problems: list[str] = []
    for port in pool or port_pool():
        url = f"http://{HOST}:{port}"
        with port_lock(port, "start"):
            status = probe(url)
            if status == "free":
                say(f"starting a backend on port {port} (log: {backends_dir() / f'{port}.log'})")
                spawn_backend(port, outputs, start_timeout)
                started = True
            elif status == "ours":
                started = False
            else:
                problems.append(f"{port}: {status}")
                continue
            fd = use_lock(port)
        return BackendLease(port, url, started, fd)
    raise BackendStartError("no usable port in the pool (" + "; ".join(problems) + ")")


def probe(url: str) -> str:
    """``ours``, ``free``, or why the port cannot be used."""
    try:
        health = httpx.get(f"{url}/healthz", timeout=2.0)
    except httpx.TransportError:
        port = int(url.rsplit(":", 1)[1])
        return "free" if bindable(port) else "in use by something that is not answering HTTP"
    try:
        ours = health.status_code == 200 and health.json().get("service") == "evaltui"
    except ValueError:
        ours = False
    if not ours:
        return "in use by a program that is not an evaltui backend"
    try:
        token = read_token()
    except TokenError as exc:
        return f"an evaltui backend, but our token is unusable ({exc})"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        answer = httpx.get(f"{url}{API_PREFIX}/admits", headers=headers, timeout=5.0)
    except httpx.TransportError as exc:
        return f"an evaltui backend that does not answer ({type(exc).__name__})"
    if answer.status_code == 401:
        return "an evaltui backend of another state dir (our token is rejected)"
    if answer.status_code != 200:
        return f"an evaltui backend without admit entries (HTTP {answer.status_code})"
    return "ours"


def spawn_backend(port: int, outputs: Path, timeout: float = 60.0) -> PidFile:
    """Spawn ``evaltui serve`` detached on ``port``; returns once it answers."""
    log_path = backends_dir() / f"{port}.log"
    argv = [sys.executable, "-m", "evaltui.cli", "serve", "--host", HOST, "--port", str(port),
            "--outputs", str(outputs)]
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log_path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    # posix_spawn, not Popen: the backend outlives this process, so nothing here should
    # own (and warn about) a child handle; setsid detaches it from our terminal.
    pid = os.posix_spawn(sys.executable, argv, dict(os.environ), file_actions=actions,
                         setsid=True)
    ref = PidRef.of(pid)
    url = f"http://{HOST}:{port}"
    pid_file = PidFile(pid, ref.create_time, port, url, str(outputs), str(log_path), time.time())
    write_json_atomic(pid_file_path(port), asdict(pid_file), mode=PRIVATE_MODE)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not ref.alive():
            _reap(pid)
            pid_file_path(port).unlink(missing_ok=True)
            raise BackendStartError(f"the backend on port {port} exited during startup:\n"
                                    f"{_tail(log_path)}")
        with contextlib.suppress(httpx.TransportError):  # not listening yet
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return pid_file
        time.sleep(0.1)
    stop_backend(pid_file, grace_sec=2.0)
    raise BackendStartError(f"the backend on port {port} did not answer within {timeout} s:\n"
                            f"{_tail(log_path)}")


def stop_backend(pid_file: PidFile, grace_sec: float = 10.0) -> bool:
    """SIGTERM the backend (only if it is still that process), SIGKILL after the grace;
    True if it was running."""
    ref = pid_file.ref
    if not ref.alive():
        return False
    os.kill(ref.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_sec
    while ref.alive() and time.monotonic() < deadline:
        _reap(ref.pid)
        time.sleep(0.05)
    if ref.alive():
        os.kill(ref.pid, signal.SIGKILL)
    _reap(ref.pid)
    return True


def _reap(pid: int) -> None:
    """Collect the exit status if the backend is our child (started by this process)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
