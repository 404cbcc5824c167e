"""The worker zygote process: a pre-imported template that forks the run's workers.

``python -m evaltui.engine.executor.local.zygoteproc`` is started once per run (by
:class:`evaltui.engine.executor.local.zygote.WorkerZygote`, through
:mod:`evaltui.engine.processes.child`, so it
arms PR_SET_PDEATHSIG against the run and reads ``sys.path`` and its config from its
inherited control pipe). It imports the worker code, numpy and the graph's nodeset modules
once, then forks a worker per request: a fork of a warm, single-threaded interpreter
starts in milliseconds where a fresh ``python -m`` pays ~0.4 s of imports. A run process
that has imported all that itself and has no thread yet forks its zygote instead
(:func:`serve_forked`): ``evaltui eval``'s, right after its spec check.

Control pipe protocol (pickled tuples):
run -> zygote ``("fork", token, pickled WorkerConfig)`` followed by one byte carrying
the worker's end of its own control socketpair (SCM_RIGHTS), ``("reap", pid)``;
zygote -> run ``("ready", pid)``, ``("forked", token, pid)`` (pid None: the config did
not unpickle; the worker's pipe got ``("failed", traceback)``), ``("exit", pid, code)``
(negative: killed by that signal).

An exited worker is reported but left unreaped (``waitid(WNOWAIT)``) until the run
sends ``reap``, so its PID cannot be reused while the run may still signal it -- the
same guarantee an unreaped ``Popen`` gives. The zygote ignores SIGTERM/SIGINT (a cancel
signals the run's group; workers end their episodes ``cancelled``) and exits when the
run closes the pipe or dies; its workers, which arm PR_SET_PDEATHSIG against it, die
with it.
"""

from __future__ import annotations

import gc
import importlib
import os
import pickle
import select
import signal
import socket
import sys
import threading
import traceback
from contextlib import suppress
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, NoReturn

from evaltui.engine.processes.child import child_bootstrap
from evaltui.engine.processes.pdeathsig import arm_pdeathsig, set_process_name
from evaltui.engine.processes.quickexit import exit_forked, exit_now

BASE_PRELOAD = ("numpy", "evaltui.engine.executor.local.worker")


@dataclass(frozen=True)
class ZygoteConfig:
    """Modules to import before the first fork (import errors are left to the workers)."""

    preload: tuple[str, ...] = field(default_factory=tuple)


def preload(modules: tuple[str, ...]) -> None:
    for name in (*BASE_PRELOAD, *modules):
        # The worker that needs it reports the import error with its config.
        with suppress(Exception):
            importlib.import_module(name)


class Zygote:
    """The fork loop: one thread, so forking it is safe."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        # A second handle on the control socket, for receiving descriptors.
        self.sock = socket.socket(fileno=os.dup(conn.fileno()))
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.live: dict[int, bool] = {}
        """Forked workers not reaped yet: pid -> whether its exit was reported."""
        self.reap_on_exit: set[int] = set()
        self.warned_threads = False

    def serve(self) -> int:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select via the wakeup fd
        self.conn.send(("ready", os.getpid()))
        fd = self.conn.fileno()
        while True:
            readable, _, _ = select.select([fd, self.wake_r], [], [])
            if self.wake_r in readable:
                os.read(self.wake_r, 4096)
            self.report_exits()
            if fd not in readable:
                continue
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                break  # the run closed the pipe or died
            if message[0] == "fork":
                self.fork(message[1], message[2])
            elif message[0] == "reap":
                self.reap(message[1])
        self.kill_all()
        return 0

    def fork(self, token: int, blob: bytes) -> None:
        _, fds, _, _ = socket.recv_fds(self.sock, 1, 1)
        worker_fd = fds[0]
        try:
            config = pickle.loads(blob)  # the first one imports what preload missed
        except Exception as exc:
            with Connection(worker_fd) as worker_conn:
                worker_conn.send(("failed", "".join(traceback.format_exception(exc)).rstrip()))
            self.conn.send(("forked", token, None))
            return
        self.check_threads()
        pid = os.fork()
        if pid == 0:
            self.become_worker(worker_fd, config)
        os.close(worker_fd)
        self.live[pid] = False
        self.conn.send(("forked", token, pid))

    def become_worker(self, worker_fd: int, config: Any) -> NoReturn:
        code = 1
        try:
            zygote = os.getppid()
            arm_pdeathsig(signal.SIGKILL, expected_parent=zygote)
            set_process_name(f"evt-worker{config.slot}")
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (self.wake_r, self.wake_w):
                os.close(fd)
            self.sock.close()
            self.conn.close()
            _reseed_numpy()
            # start-up: a fresh zygote (main) imports the worker code in preload(), once its
            # death signal is armed and SIGTERM ignored, and leaves an import error to the
            # worker that needs it; at the top these ~0.6 s would come first. Here it is a
            # lookup in sys.modules.
            from evaltui.engine.executor.local.worker import serve

            code = serve(Connection(worker_fd), config)
        except BaseException:
            traceback.print_exc()
        finally:
            exit_forked(code)

    def report_exits(self) -> None:
        for pid, reported in list(self.live.items()):
            if reported:
                continue
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is None:
                continue
            killed = info.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
            self.live[pid] = True
            with suppress(OSError):  # the run is gone; we exit at the next read
                self.conn.send(("exit", pid, -info.si_status if killed else info.si_status))
            if pid in self.reap_on_exit:
                self.reap(pid)

    def reap(self, pid: int) -> None:
        if pid not in self.live:
            return
        if not self.live[pid]:
            self.reap_on_exit.add(pid)  # still running: reap once it has exited
            return
        os.waitpid(pid, 0)
        del self.live[pid]
        self.reap_on_exit.discard(pid)

    def kill_all(self) -> None:
        for pid in self.live:
            with suppress(ProcessLookupError, ChildProcessError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        self.live.clear()

    def check_threads(self) -> None:
        # A module that started a Python thread at import makes forking unsafe for it.
        if threading.active_count() > 1 and not self.warned_threads:
            self.warned_threads = True
            print(f"evaltui zygote: {threading.active_count() - 1} thread(s) started by an "
                  f"imported module ({[t.name for t in threading.enumerate()]}); workers "
                  "forked from here get none of them", file=sys.stderr, flush=True)


def _reseed_numpy() -> None:
    # ``random`` reseeds itself after a fork; numpy's legacy global generator does not,
    # and fresh processes each had their own OS-entropy seed.
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def serve_forked(fd: int, parent: int) -> int:
    """The zygote forked from its run (no exec): the run has imported the worker code and
    the nodesets already; ``fd`` is this end of the control socketpair. Returns the exit
    code, to be passed to ``os._exit`` (the run's atexit handlers are not this process's)."""
    arm_pdeathsig(signal.SIGKILL, expected_parent=parent)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    set_process_name("evt-zygote")
    preload(())  # what the run had not imported (nothing, normally)
    # No gc.collect() first (~35 ms of the run's heap, while the pool waits for this
    # process): what garbage there is stays frozen with the rest, shared by the workers.
    gc.freeze()
    return Zygote(Connection(fd)).serve()


def main() -> int:
    conn, config, _ = child_bootstrap()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    set_process_name("evt-zygote")
    preload(config.preload)
    gc.collect()
    gc.freeze()  # keep the template's objects out of the workers' collections (less COW)
    return Zygote(conn).serve()


if __name__ == "__main__":
    # The run waits for its zygote to exit: no ~0.15 s teardown of numpy and the nodesets.
    exit_now(main())

