"""The nodeset host subprocess: its owner's handle (start, watch, restart) and its main.

The run starts one (``python -m evaltui.engine.hosting.hostprocess``) for each shared nodeset
that ``shared_urls.json`` has no URL for. A host that dies is restarted at the same URL,
so clients only need to reconnect. The host arms PR_SET_PDEATHSIG and stops when its
owner closes the control pipe (not on SIGTERM, see ``main``), so it never outlives the
run yet serves the run's workers until they are done.

numpy's BLAS runs one thread in a host unless ``OPENBLAS_NUM_THREADS`` says otherwise
(``HostConfig.blas_threads``): a host calls its model from one thread, many small
batches a second, and OpenBLAS's extra threads spin between those calls -- on the
2-core machine a batch of 8 cost the host ~300 us of CPU per request instead of ~30,
taking the cores the run's workers need. This module imports numpy only in ``main``,
after setting the variable.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any

from evaltui.engine.foreign.envspec import NodesetEnvironment
from evaltui.engine.hosting.host import serve_nodeset  # numpy: after the variable is set
from evaltui.engine.processes.child import Child, child_bootstrap, spawn_child
from evaltui.engine.usererrors import NodesetConstructorError, one_line

START_TIMEOUT_SEC = 120.0


class HostStartError(RuntimeError):
    """A host subprocess could not build its nodeset or bind its URL."""


@dataclass(frozen=True)
class HostConfig:
    """What a host subprocess needs; sent through its control pipe (it holds the secret)."""

    name: str
    impl: str
    url: str
    secret: bytes = field(repr=False)
    params: dict[str, Any] = field(default_factory=dict)
    max_batch_size: int = 32
    max_wait_ms: float = 2.0
    batching: bool = True
    blas_threads: int | None = 1
    """OpenBLAS threads in the host (None: OpenBLAS's default); the environment wins."""
    env: dict[str, str] = field(default_factory=dict)
    """Set in the host's environment (a replica's ``CUDA_VISIBLE_DEVICES``)."""
    environment: NodesetEnvironment | None = None
    """The nodeset's own Python environment (DESIGN §13): the host fronts one there."""


class HostProcess:
    """One nodeset host subprocess; ``start``/``stop`` bound it, ``restart`` replaces it."""

    def __init__(self, config: HostConfig) -> None:
        self.config = config
        self.child: Child | None = None
        self.pid: int | None = None
        self.restarts = 0

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def url(self) -> str:
        return self.config.url

    def start(self, timeout: float = START_TIMEOUT_SEC) -> str:
        """Spawn the host and wait until it accepts connections; returns its URL."""
        self.spawn()
        return self.wait_ready(timeout)

    def spawn(self) -> None:
        """Start the subprocess without waiting (replicas start side by side)."""
        self.child = spawn_child("evaltui.engine.hosting.hostprocess", self.config,
                                 name=f"host:{self.name}", args=["--nodeset", self.name],
                                 env=self.config.env)

    def wait_ready(self, timeout: float = START_TIMEOUT_SEC) -> str:
        """Wait for a spawned host to accept connections; returns its URL."""
        assert self.child is not None
        if not self.child.conn.poll(timeout):
            self.child.end(grace_sec=1.0)
            raise HostStartError(f"host of nodeset {self.name!r} did not start within "
                                 f"{timeout} s")
        try:
            message = self.child.conn.recv()
        except (EOFError, OSError):
            raise HostStartError(f"host of nodeset {self.name!r} died while starting "
                                 f"({self.child.describe_exit()})") from None
        if message[0] != "ready":
            self.child.end(grace_sec=1.0)
            raise HostStartError(f"host of nodeset {self.name!r} failed to start: {message[1]}")
        _, url, self.pid = message
        # Pin a resolved tcp port so that a restarted host comes back at the same URL.
        self.config = replace(self.config, url=url)
        return url

    def died(self) -> bool:
        """True once the subprocess is gone (its control pipe closed)."""
        if self.child is None:
            return False
        if not self.child.conn.poll(0):
            return False
        try:
            self.child.conn.recv_bytes()
        except (EOFError, OSError):
            return True
        return False  # a stray message; the host is alive

    def restart(self) -> str:
        """Replace a dead (or live) host by a fresh one at the same URL."""
        if self.child is not None:
            self.child.end(grace_sec=1.0)
        self.restarts += 1
        return self.start()

    def stop(self, grace_sec: float = 2.0) -> None:
        """Close its pipe (it closes its nodeset and exits), SIGKILL after ``grace_sec``."""
        if self.child is not None:
            self.child.end(grace_sec=grace_sec)


def main() -> int:
    """``python -m evaltui.engine.hosting.hostprocess``: the host subprocess itself."""
    conn, config, _ = child_bootstrap()
    if config.blas_threads is not None:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", str(config.blas_threads))
    stop = threading.Event()
    # A cancel SIGTERMs the run's whole group: if the host quit at once, workers in the
    # middle of a call would end their episode `error` instead of `cancelled` at the next
    # step. So the host serves on until its owner closes the control pipe (the owner
    # does so once its workers are done; if the owner dies, PR_SET_PDEATHSIG kills us).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)

    def watch_parent() -> None:
        # The owner closing the control pipe (or dying) means: stop hosting.
        try:
            while conn.recv_bytes():
                continue
        except (EOFError, OSError):
            stop.set()

    threading.Thread(target=watch_parent, name="host-parent", daemon=True).start()
    try:
        serve_nodeset(config.impl, config.params, config.url, config.secret, stop=stop,
                      max_batch_size=config.max_batch_size, max_wait_ms=config.max_wait_ms,
                      batching=config.batching, environment=config.environment,
                      name=config.name, on_ready=lambda url: conn.send(("ready", url, os.getpid())))
    except Exception as exc:
        # One line for the run's error; the traceback to stderr (the run's run.log).
        build = isinstance(exc, NodesetConstructorError)
        print(exc.detail if build else "".join(traceback.format_exception(exc)).rstrip(),
              file=sys.stderr, flush=True)
        line = str(exc) if build else one_line(exc)
        with suppress(OSError):  # the parent is gone; nobody to tell
            conn.send(("failed", f"{line}; its traceback is in run.log"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
