"""SubprocessLauncher: starts shared nodeset hosts (evaltui.scheduler.shared.nodeset_host) detached.

Each host listens on a unix socket in a private runtime dir (``$TMPDIR/evaltui-{uid}``,
mode 0700, short enough for the 108-byte socket path limit) and authenticates with the
per-host secret. Its stderr goes to ``state_dir()/shared/logs/{name}.log``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from evaltui.contract.pidref import PidRef
from evaltui.engine.hosting.channel import UNIX_SCHEME, host_secret, parse_url
from evaltui.procs.groups import terminate_group
from evaltui.rundir.layout import state_dir
from evaltui.scheduler.shared.hostfiles import HOSTS_DIRNAME
from evaltui.scheduler.shared.nodesets import HostedProcess, NodesetError

START_TIMEOUT_SEC = 120.0


def hosts_dir() -> Path:
    """``state_dir()/shared/hosts``: one file per host (see ``hostfiles``)."""
    return state_dir() / "shared" / HOSTS_DIRNAME


def runtime_dir() -> Path:
    """``$TMPDIR/evaltui-{uid}`` (0700): where host sockets live."""
    path = Path(tempfile.gettempdir()) / f"evaltui-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


class SubprocessLauncher:
    """Starts and stops detached nodeset host processes."""

    def __init__(self, start_timeout: float = START_TIMEOUT_SEC, grace_sec: float = 10.0
                 ) -> None:
        self.start_timeout = start_timeout
        self.grace_sec = grace_sec

    def start(self, name: str, impl: str, params: Mapping[str, Any],
              env: Mapping[str, str]) -> HostedProcess:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:40]
        sock = runtime_dir() / f"{safe}-{secrets.token_hex(4)}.sock"
        host_secret(create=True)  # before the host starts: runs may dial at once
        logs = state_dir() / "shared" / "logs"
        logs.parent.mkdir(mode=0o700, exist_ok=True)
        logs.mkdir(mode=0o700, exist_ok=True)
        config = {"impl": impl, "params": dict(params), "url": f"{UNIX_SCHEME}://{sock}",
                  "sys_path": list(sys.path)}
        log_fd = os.open(logs / f"{safe}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(log_fd, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "evaltui.scheduler.shared.nodeset_host", "--nodeset", name],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=dict(env),
                start_new_session=True,
            )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(config).encode() + b"\n")
            proc.stdin.close()
            line = _read_line(proc.stdout, self.start_timeout)
        except (OSError, TimeoutError) as exc:
            _kill(proc)
            raise NodesetError(f"host of {name!r} did not start: {exc}") from None
        finally:
            proc.stdout.close()
        try:
            message = json.loads(line)
        except ValueError:
            message = {"error": f"exited ({proc.wait()}) before it was ready; see "
                                f"{logs / f'{safe}.log'}"}
        if "url" not in message:
            proc.wait()
            raise NodesetError(f"host of {name!r} failed to start:\n{message.get('error')}")
        ref = PidRef.of(proc.pid)
        # Reap the host when it ends, so it never lingers as a zombie of ours.
        threading.Thread(target=proc.wait, name=f"evaltui-host-{proc.pid}", daemon=True).start()
        return HostedProcess(str(message["url"]), ref)

    def stop(self, hosted: HostedProcess) -> None:
        """SIGTERM now, SIGKILL after the grace period, off the caller's thread."""
        def end() -> None:
            terminate_group(hosted.ref, self.grace_sec)
            path = parse_url(hosted.url).address
            if isinstance(path, str):
                Path(path).unlink(missing_ok=True)

        threading.Thread(target=end, name=f"evaltui-unload-{hosted.ref.pid}", daemon=True).start()


def _read_line(stream: Any, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    buf = b""
    fd = stream.fileno()
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no answer within {timeout} s")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf += chunk
    return buf.split(b"\n", 1)[0]


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
