"""WorkerZygote: the run's handle on its worker template process (DESIGN §1).

A worker started as a fresh interpreter would pay ~0.4 s of interpreter start and imports,
all K at once on the run's cores. So the run starts one zygote
(:mod:`evaltui.engine.executor.local.zygoteproc`) -- as early as it can, so that its
imports overlap the run's own -- and each worker is a fork of it: the zygote has imported
the worker code, numpy and the graph's nodeset modules already, so a worker is ready in
milliseconds and K of them start together. A run process with threads is never forked; ``evaltui
eval``'s run forks its zygote (:meth:`WorkerZygote.start_by_fork`) right after its spec
check, before it has any thread: it has imported all the zygote would by then.

Process tree and death: run -> zygote (PR_SET_PDEATHSIG against the run's thread that
started it) -> workers (PR_SET_PDEATHSIG against the zygote). A killed run takes the
zygote along, and the zygote its workers. A killed zygote takes its workers along: the
pool sees them die (their episodes are ``error``, retried if allowed), and the next fork
starts a fresh zygote, up to :data:`MAX_STARTS` zygotes per run; then :class:`ZygoteError`.

Each worker gets its own control socketpair, made here; the worker's end travels to the
zygote as a descriptor (SCM_RIGHTS) over the zygote's inherited control pipe, and the
worker's config (which may hold the run's secret) as bytes on that pipe: never argv,
environment or disk. A worker is a :class:`ForkedChild`, which offers what
:class:`~evaltui.engine.processes.child.Child` offers (``conn``, ``pid``, ``exit_code``,
``describe_exit``, ``send_signal``, ``end``); exit codes come from the zygote, which
keeps an exited worker unreaped until :meth:`ForkedChild.end` so its PID stays ours.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, cast

from evaltui.engine.executor.local.zygotefork import ForkedProcess, fork_zygote
from evaltui.engine.executor.local.zygoteproc import ZygoteConfig
from evaltui.engine.processes.child import Child, spawn_child

MAX_STARTS = 4
"""Zygotes a run may start (the first plus restarts) before it gives up."""
PID_TIMEOUT_SEC = 120.0
"""How long to wait for the zygote to report a fork (it may still be importing)."""


def preload_modules(spec: Any) -> list[str]:
    """The modules of a JobSpec dict's nodeset impls (``"pkg.mod:Class"``), best effort."""
    try:
        nodesets = spec["graph"]["nodesets"].values()
        return sorted({ns["impl"].split(":", 1)[0] for ns in nodesets
                       if isinstance(ns.get("impl"), str)
                       and "environment" not in ns})  # those import in their own
    except (KeyError, TypeError, AttributeError):
        return []  # a malformed spec: the runner reports it; the first fork imports


class ZygoteError(RuntimeError):
    """The zygote keeps dying: workers cannot be started."""


class WorkerZygote:
    """Starts the zygote and forks workers from it; call from one thread only.

    That thread must outlive the zygote (its PR_SET_PDEATHSIG is tied to it), which the
    run's main thread does.
    """

    def __init__(self, preload: Sequence[str] = ()) -> None:
        self.preload = tuple(preload)
        self.child: Child | None = None
        self.starts = 0
        self.ready = False
        """The current zygote process has done its imports."""
        self.last_death = ""
        self._sock: socket.socket | None = None
        self._token = 0
        self._pids: dict[int, int | None] = {}
        self._exits: dict[int, int] = {}
        self._orphaned: set[int] = set()
        self._live: set[int] = set()
        """Forked workers the run has not released (``reap``) yet."""

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> WorkerZygote:
        """Spawn the zygote process (does not wait for its imports)."""
        if self.starts >= MAX_STARTS:
            raise ZygoteError(f"the worker zygote died {self.starts} times "
                              f"(last: {self.last_death}); giving up")
        self.starts += 1
        self.ready = False
        self.child = spawn_child("evaltui.engine.executor.local.zygoteproc",
                                 ZygoteConfig(self.preload), name="zygote")
        self._sock = socket.socket(fileno=os.dup(self.child.conn.fileno()))
        return self

    def start_by_fork(self) -> WorkerZygote:
        """Fork the zygote from this process instead of starting a fresh interpreter: no
        second ~0.6 s of imports, for a process that has imported the worker code and the
        graph's nodesets already. Only while this process has no other thread (a fork
        carries one thread along, and whatever lock another held); else :meth:`start`.
        Restarts after a death use :meth:`start`."""
        if self.starts >= MAX_STARTS or threading.active_count() > 1:
            return self.start()
        self.starts += 1
        self.ready = False
        pid, conn = fork_zygote()
        self.child = Child(name="zygote", proc=cast(Any, ForkedProcess(pid)), conn=conn)
        self._sock = socket.socket(fileno=os.dup(conn.fileno()))
        return self

    @property
    def pid(self) -> int | None:
        return self.child.pid if self.child is not None else None

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the zygote has done its imports (forks may be asked for before)."""
        self._pump_until(lambda: self.ready, timeout)
        return self.ready

    def alive(self) -> bool:
        """False once the zygote process is gone (its pipe closed)."""
        if self.child is None:
            return False
        self.pump(0)
        return self.child is not None

    def close(self, grace_sec: float = 2.0) -> None:
        """Close the pipe: the zygote SIGKILLs and reaps what is left of its workers."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.child is not None:
            self.child.end(grace_sec=grace_sec)
            self.child = None

    def __enter__(self) -> WorkerZygote:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- forking ---------------------------------------------------------------------------
    def fork(self, config: Any, name: str) -> ForkedChild:
        """A new worker running ``worker.serve`` with ``config``; restarts a dead zygote."""
        blob = pickle.dumps(config, protocol=pickle.HIGHEST_PROTOCOL)
        if not self.alive():
            self.start()
        ours, theirs = socket.socketpair()
        try:
            self._token += 1
            token = self._token
            assert self.child is not None and self._sock is not None
            try:
                self.child.conn.send(("fork", token, blob))
                socket.send_fds(self._sock, [b"F"], [theirs.fileno()])
            except OSError:
                # It died just now: the pool sees this worker fail to start, and the
                # next fork starts a fresh zygote.
                self._pids[token] = None
                self._on_zygote_death()
        finally:
            theirs.close()
        return ForkedChild(name, Connection(ours.detach()), self, token)

    def pump(self, timeout: float) -> None:
        """Read the zygote's reports (forks, exits) for up to ``timeout`` seconds."""
        child = self.child
        if child is None:
            return
        deadline = time.monotonic() + timeout
        while True:
            wait = max(deadline - time.monotonic(), 0.0)
            try:
                if not child.conn.poll(wait):
                    return
                message = child.conn.recv()
            except (EOFError, OSError):
                self._on_zygote_death()
                return
            kind = message[0]
            if kind == "ready":
                self.ready = True
            elif kind == "forked":
                self._pids[message[1]] = message[2]
                if message[2] is not None:
                    self._live.add(message[2])
            elif kind == "exit":
                self._exits[message[1]] = message[2]
            timeout = 0.0
            deadline = time.monotonic()

    def _pump_until(self, done: Callable[[], bool], timeout: float) -> None:
        """Read the zygote's reports until ``done()``, its death, or ``timeout`` (at least
        once: what it reported already is read even with no time left)."""
        deadline = time.monotonic() + timeout
        while not done() and self.child is not None:
            left = deadline - time.monotonic()
            self.pump(max(left, 0.0))
            if left <= 0:
                break

    def _on_zygote_death(self) -> None:
        child, self.child = self.child, None
        if child is None:
            return
        self.last_death = f"pid {child.pid}, {child.describe_exit()}"
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        child.end(grace_sec=0.5)
        # Its workers died with it (PR_SET_PDEATHSIG) and were reaped by init: their
        # PIDs are no longer ours to signal.
        for pid in self._live:
            if pid not in self._exits:
                self._exits[pid] = -signal.SIGKILL
                self._orphaned.add(pid)
        for token in range(1, self._token + 1):
            self._pids.setdefault(token, None)  # asked for, never forked

    # ---- what ForkedChild asks ------------------------------------------------------------
    def fork_result(self, token: int, timeout: float = PID_TIMEOUT_SEC
                    ) -> tuple[bool, int | None]:
        """(known, pid) of a fork request: pid None if it was never forked."""
        self._pump_until(lambda: token in self._pids, timeout)
        return token in self._pids, self._pids.get(token)

    def exit_code(self, pid: int, wait_sec: float) -> int | None:
        self._pump_until(lambda: pid in self._exits, wait_sec)
        return self._exits.get(pid)

    def killed_with_zygote(self, pid: int) -> bool:
        return pid in self._orphaned

    def reap(self, pid: int) -> None:
        """The run is done with this worker: the zygote may reap it (its PID is freed)."""
        self._live.discard(pid)
        self._exits.pop(pid, None)
        self._orphaned.discard(pid)
        if self.child is not None:
            try:
                self.child.conn.send(("reap", pid))
            except OSError:
                self._on_zygote_death()


@dataclass(eq=False)
class ForkedChild:
    """A worker forked by the zygote; the same surface as :class:`Child`."""

    name: str
    conn: Connection
    zygote: WorkerZygote = field(repr=False)
    token: int
    _ended: bool = False
    _pid: int | None = None
    _pid_known: bool = False
    _code: int | None = None

    @property
    def pid(self) -> int | None:
        """The worker's PID (None if it was never forked: its config did not unpickle)."""
        if not self._pid_known:
            self._pid_known, self._pid = self.zygote.fork_result(self.token)
        return self._pid

    def exit_code(self, wait_sec: float = 0.0) -> int | None:
        pid = self.pid
        if pid is None:
            return 1
        if self._ended:
            return self._code
        return self.zygote.exit_code(pid, wait_sec)

    def describe_exit(self, wait_sec: float = 1.0) -> str:
        if self.pid is None:
            death = self.zygote.last_death
            return f"never forked (its zygote died: {death})" if death else "never forked"
        code = self.exit_code(wait_sec)
        if code is None:
            return "still running"
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        pid = self.pid
        if pid is not None and self.zygote.killed_with_zygote(pid):
            how += f", its zygote died: {self.zygote.last_death}"
        return how

    def send_signal(self, sig: int) -> None:
        pid = self.pid
        # An unreaped worker's PID is ours; after a reported exit there is nobody to signal.
        if pid is not None and self.zygote.exit_code(pid, 0.0) is None:
            with suppress(ProcessLookupError):
                os.kill(pid, sig)

    def end(self, grace_sec: float = 2.0) -> None:
        """Close the pipe, SIGTERM, SIGKILL after ``grace_sec``; then let the zygote reap."""
        self.conn.close()
        if self._ended:
            return
        pid = self.pid
        if pid is None:
            self._ended = True
            return
        if self.exit_code() is None:
            self.send_signal(signal.SIGTERM)
            if self.exit_code(grace_sec) is None:
                self.send_signal(signal.SIGKILL)
                self.exit_code(5.0)
        self._code = self.exit_code()
        self._ended = True
        self.zygote.reap(pid)
