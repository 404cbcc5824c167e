"""A nodeset host in another Python environment, seen from evaltui: spawn, ask, stop.

:class:`ForeignHost` starts ``ARGV -c BOOTSTRAP`` (:mod:`.boot`) with two pipes -- the
child's stdin for requests, its stdout for answers -- and talks :mod:`.envwire` over
them. The pipes are the channel: inherited by that one child, they have no address any
other process could dial (as the control pipes that carry the run's secrets), and
nothing on them is unpickled on either side. The child dies with this process
(PR_SET_PDEATHSIG, armed in it) and when its stdin closes.
"""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import tempfile
import threading
from contextlib import suppress
from typing import Any

from evaltui.engine.foreign.boot import BOOTSTRAP, boot_message
from evaltui.engine.foreign.envwire import WireClosed, recv, send
from evaltui.engine.usererrors import verbose

START_TIMEOUT_SEC = 600.0
"""How long a host may take to import its module and build its nodeset."""


class ForeignHostError(RuntimeError):
    """The host in the other environment could not start, or died."""


class ForeignRemoteError(RuntimeError):
    """The nodeset in the other environment raised; ``line`` is its one-line form."""

    def __init__(self, type_name: str, line: str, remote_traceback: str) -> None:
        super().__init__(f"{line}\n--- in the nodeset's own environment ---\n"
                         f"{remote_traceback.rstrip()}")
        self.type_name = type_name
        self.line = line


class ForeignHost:
    """One host subprocess in another environment (thread-safe, one request at a time)."""

    def __init__(self, argv: list[str], impl: str, label: str) -> None:
        self.argv = list(argv)
        self.impl = impl
        self.label = label
        self.proc: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def start(self, mode: str, *, params: dict[str, Any] | None = None,
              episodes: list[Any] | None = None, stderr: Any = None,
              timeout: float = START_TIMEOUT_SEC) -> dict[str, Any]:
        """Spawn it, send the boot message, wait for its first answer (the class's
        description); raises ForeignHostError or ForeignRemoteError."""
        try:
            self.proc = subprocess.Popen(self.argv + ["-c", BOOTSTRAP], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=stderr, bufsize=0)
        except OSError as exc:
            raise ForeignHostError(f"cannot start {self.label}'s interpreter "
                                   f"{self.argv[0]!r}: {exc.strerror or exc}") from None
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with suppress(OSError):  # it died at once: the read below says how
            self.proc.stdin.write(boot_message(mode, self.impl, params=params,
                                               episodes=episodes))
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.stop()
            raise ForeignHostError(f"{self.label} did not start within {timeout:.0f} s")
        self.info = self._answer("start")
        return self.info

    def request(self, kind: str, name: str | None, payload: Any) -> Any:
        with self._lock:
            if self.proc is None or self.proc.stdin is None:
                raise ForeignHostError(f"{self.label} is not running")
            try:
                send(self.proc.stdin.fileno(), [kind, name, payload])
            except (BrokenPipeError, OSError):
                self._gone(f"{kind} {name!r}")
            return self._answer(f"{kind} {name!r}")

    def _answer(self, doing: str) -> Any:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            reply = recv(self.proc.stdout.fileno())
        except (WireClosed, OSError):
            self._gone(doing)
        if reply[0] == "ok":
            return reply[1]
        _, type_name, line, remote_tb = reply
        raise ForeignRemoteError(type_name, line, remote_tb)

    def _gone(self, doing: str) -> None:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        how = ("still running" if code is None else f"killed by {signal.Signals(-code).name}"
               if code < 0 else f"exit status {code}")
        raise ForeignHostError(f"{self.label} (pid {self.proc.pid}) went away during "
                               f"{doing} ({how})")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace_sec: float = 5.0) -> None:
        """Close its stdin (it closes its nodeset and exits); SIGKILL after ``grace_sec``."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for pipe in (proc.stdin, proc.stdout):
            with suppress(OSError):
                if pipe is not None:
                    pipe.close()
        try:
            proc.wait(timeout=grace_sec)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def describe_class(argv: list[str], impl: str, label: str, *,
                   episodes: list[Any] | None = None) -> dict[str, Any]:
    """Ask the other interpreter what ``impl`` is (one short-lived process).

    Its stderr goes to a temp file, whose tail the error carries when it fails before
    answering (an interpreter that cannot run at all), and which ``--verbose`` prints
    (the traceback of a module that failed to import over there).
    """
    with tempfile.TemporaryFile() as err:
        host = ForeignHost(argv, impl, label)
        try:
            info = host.start("describe", episodes=episodes, stderr=err)
        except ForeignHostError as exc:
            tail = [ln for ln in _text(err).splitlines() if ln.strip()]
            raise ForeignHostError(f"{exc}: {tail[-1].strip()}" if tail else str(exc)) \
                from None
        finally:
            host.stop(grace_sec=10.0)
            if verbose():
                sys.stderr.write(_text(err))
    return info


def _text(file: Any) -> str:
    file.seek(0)
    return file.read().decode(errors="replace")

