"""How ``evaltui eval`` starts its run: the run process first, then the spec, then its answer.

The run process (``python -m evaltui.engine.main --spec-from-stdin --reply-fd N``) is
started before anything else, so that its imports overlap with the building of the spec
here. It gets the spec on its stdin, checks it -- the one check: this process never
imports a nodeset module -- writes the run dir, and answers on a pipe of its own with the
run dir or the one-line refusal (:mod:`evaltui.engine.run.intake`).

Until the run is followed, Ctrl-C is not raised in the middle of whatever is being
imported (pydantic's Rust core panics when interrupted in its import): it is remembered
and passed on as SIGTERM to the run, which then writes no run dir or runs the one it
wrote as ``cancelled``; a second Ctrl-C SIGKILLs it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import IO, Any


@dataclass
class RunProcess:
    """The run process started before the spec exists, and the read end of its answer."""

    proc: subprocess.Popen[bytes]
    reply: IO[bytes]


def start_run_process() -> RunProcess:
    """Start the run process; it waits for the spec on stdin (raises OSError)."""
    env = dict(os.environ)
    env["EVALTUI_PARENT_PID"] = str(os.getpid())  # as spawn_run sets them
    env.setdefault("PYTHONUNBUFFERED", "1")
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "evaltui.engine.main", "--spec-from-stdin",
             "--reply-fd", str(write_end)],
            # stderr ours until it has its run.log: an import error shows here. Its answer
            # comes on its own pipe: what its imports print on stdout goes nowhere.
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, pass_fds=(write_end,),
            start_new_session=True, env=env)
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)  # the run process holds the only write end: EOF if it dies
    return RunProcess(proc, os.fdopen(read_end, "rb"))


def hand_over(early: RunProcess, spec: dict[str, Any], outputs: str | None
              ) -> dict[str, Any] | None:
    """Give the run process the spec; its answer (None if it ended without one)."""
    assert early.proc.stdin is not None
    try:
        early.proc.stdin.write(json.dumps({"spec": spec, "outputs": outputs}).encode())
        early.proc.stdin.close()
    except OSError:
        pass  # it died already: no answer comes
    line = early.reply.readline()
    early.reply.close()
    return json.loads(line) if line.strip() else None


def discard(early: RunProcess) -> None:
    """Stop a run process that will get no spec (it has written nothing)."""
    early.reply.close()
    if early.proc.stdin is not None:
        try:
            early.proc.stdin.close()  # on its own it exits at this end of input
        except OSError:  # a broken pipe: it is gone already, or the kill below ends it
            pass
    if early.proc.poll() is None:
        os.killpg(early.proc.pid, signal.SIGKILL)  # rather than wait for its imports
    early.proc.wait()


class DeferredInterrupt:
    """While active, SIGINT sets ``seen`` and signals the watched run's process group
    (SIGTERM, then SIGKILL) instead of raising KeyboardInterrupt; the previous handler
    comes back on exit."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.seen = False
        self._previous: Any = None

    def watch(self, proc: subprocess.Popen[bytes]) -> None:
        """The run process to pass Ctrl-C on to (one seen before it existed: now)."""
        self.proc = proc
        if self.seen:
            self._signal(signal.SIGTERM)

    def __enter__(self) -> DeferredInterrupt:
        self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def _on_sigint(self, _signum: int, _frame: object) -> None:
        sig = signal.SIGKILL if self.seen else signal.SIGTERM
        self.seen = True
        self._signal(sig)

    def _signal(self, sig: int) -> None:
        # Not reaped yet: the PID is still our child's.
        if self.proc is not None and self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
