"""The nodeset host that runs INSIDE another Python environment (Python >= 3.8).

Started by :mod:`evaltui.engine.foreign.hostproc` as ``PYTHON -c BOOTSTRAP`` (the
bootstrap is :data:`evaltui.engine.foreign.boot.BOOTSTRAP`), it gets this module's source,
evaltui's public nodeset API (``evaltui.engine.nodes``), :mod:`.envwire` and
:mod:`evaltui.engine.usererrors` through its stdin: nothing of evaltui is installed there.
Only Python 3.8 syntax and the stdlib here (a test parses it as 3.8).

It imports the nodeset's module, then either describes the class (``describe`` mode: what
graph checking needs) or builds the nodeset and serves requests until its stdin closes
(``host`` mode). Requests are ``[kind, name, payload]``: ``call`` (a node op),
``method`` (``set_episode``/``begin_episode``/``trajectory``), ``ping``; answers
``["ok", value]`` or ``["error", type, one line, traceback]``. Its stdout is the reply pipe
(the nodeset's own prints go to stderr); it dies with its parent (PR_SET_PDEATHSIG) and
ignores SIGTERM (a cancel signals the run's whole group; the worker ends it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import inspect
import json
import os
import signal
import sys
import traceback

from evaltui.engine.foreign.envwire import WireClosed, recv, send
from evaltui.engine.nodes import EnvNodeSet, ImplError, import_impl
from evaltui.engine.usererrors import one_line

METHODS = ("set_episode", "begin_episode", "trajectory")
_PR_SET_PDEATHSIG = 1


def _arm_pdeathsig(parent):
    """Die with the process that started us; a launcher between us (conda run) is the
    parent then, and it dies with evaltui's process the same way."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent is gone already: nobody will read our answers
        os._exit(1)


def _traceback_text(exc):
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def _error(exc, line=None):
    return ["error", type(exc).__name__, line or one_line(exc), _traceback_text(exc)]


def _json_default(value):
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def describe(cls):
    """What evaltui's graph checking needs of the class, in JSON."""
    params = []
    try:
        signature = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        signature = None
    for p in list(signature.parameters.values())[1:] if signature else []:
        has_default = p.default is not inspect.Parameter.empty
        sendable = has_default and _json_default(p.default)
        params.append([p.name, int(p.kind), has_default, p.default if sendable else None])
    is_env = isinstance(cls, type) and issubclass(cls, EnvNodeSet)
    own_limit = is_env and getattr(cls.step_limit, "__func__", None) is not \
        EnvNodeSet.step_limit.__func__
    return {
        "module": cls.__module__,
        "qualname": cls.__qualname__,
        "is_env": is_env,
        "success_distance": float(getattr(cls, "success_distance", 1.0)),
        "node_specs": {op: [list(s.inputs), list(s.outputs), s.batched, s.batch_dim]
                       for op, s in cls.node_specs().items()},
        "batching_error": cls.batching_error(),
        "params": params,
        "has_step_limit": bool(own_limit),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "pid": os.getpid(),
    }


def _serve(nodeset, fd_in, fd_out):
    while True:
        try:
            request = recv(fd_in)
        except WireClosed:
            return
        try:
            kind, name, payload = request
            if kind == "call":
                answer = ["ok", nodeset.call(name, payload)]
            elif kind == "method" and name in METHODS:
                answer = ["ok", getattr(nodeset, name)(*payload)]
            elif kind == "ping":
                answer = ["ok", None]
            else:
                raise ValueError(f"unknown request {kind!r} {name!r}")
        except Exception as exc:  # the nodeset's fault is the caller's to report
            answer = _error(exc)
        try:
            send(fd_out, answer)
        except TypeError as exc:  # a value that cannot cross: say which
            send(fd_out, _error(exc))


def main(fd_in, fd_out, boot):
    """The host's life: import, then describe or build and serve; the exit status."""
    _arm_pdeathsig(boot.get("parent"))
    # A cancel SIGTERMs the run's whole process group, this host included: quitting at once
    # would end the episode in flight `error`, not `cancelled` at its next step. The host
    # serves until its stdin closes (the worker is done) or its parent dies (above).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    sys.path.extend(p for p in boot.get("path", ()) if p not in sys.path)
    try:
        cls = import_impl(boot["impl"])
    except ImplError as exc:
        send(fd_out, _error(exc, str(exc)))
        return 1
    info = describe(cls)
    if boot["mode"] == "describe":
        episodes = boot.get("episodes")
        if episodes is not None and info["is_env"]:
            try:
                info["step_limits"] = [cls.step_limit(ep) for ep in episodes]
            except Exception as exc:
                send(fd_out, _error(exc))
                return 1
        send(fd_out, ["ok", info])
        return 0
    try:
        nodeset = cls(**boot["params"])
    except Exception as exc:
        print(_traceback_text(exc), file=sys.stderr, flush=True)
        send(fd_out, _error(exc))
        return 1
    try:
        send(fd_out, ["ok", info])
        _serve(nodeset, fd_in, fd_out)
    finally:
        nodeset.close()
    return 0
