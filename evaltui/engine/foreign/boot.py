"""How a host in another environment starts: the bootstrap and the modules it is sent.

The other interpreter runs ``PYTHON -c BOOTSTRAP``. The bootstrap takes the pipes (its
stdin and a copy of its stdout; the nodeset's own prints then go to stderr), reads one
boot message (``!Q`` length + JSON: the modules' sources and what to do), makes those
modules (``evaltui``, ``evaltui.engine.nodes`` -- the real file, so ``from
evaltui.engine.nodes import NodeSet`` works there with nothing of evaltui installed --,
:mod:`.envwire`, :mod:`.envhost`) and hands over to :func:`.envhost.main`. Nothing is
written to that environment's disk, so it works through a container launcher too.
"""

from __future__ import annotations

import json
import os
import site
import struct
import sys
import sysconfig
from pathlib import Path
from typing import Any

from evaltui.engine import nodes, usererrors
from evaltui.engine.foreign import envhost, envwire

BOOTSTRAP = r'''
import json, os, struct, sys, types
def _read(fd, size):
    buf = b""
    while len(buf) < size:
        chunk = os.read(fd, size - len(buf))
        if not chunk:
            sys.exit(3)
        buf += chunk
    return buf
_fd_in, _fd_out = os.dup(0), os.dup(1)
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
os.dup2(2, 1)
_boot = json.loads(_read(_fd_in, struct.unpack("!Q", _read(_fd_in, 8))[0]).decode())
for _name, _file, _src in _boot["modules"]:
    _mod = types.ModuleType(_name)
    sys.modules[_name] = _mod
    if "." in _name:
        _parent, _, _leaf = _name.rpartition(".")
        setattr(sys.modules[_parent], _leaf, _mod)
    if _src is None:
        _mod.__path__ = []
    else:
        _mod.__file__ = _file
        exec(compile(_src, _file, "exec"), _mod.__dict__)
sys.exit(sys.modules["evaltui.engine.foreign.envhost"].main(_fd_in, _fd_out, _boot))
'''
"""Python 3.8 syntax (a test parses it so); stdlib only."""

SHIPPED = (usererrors, nodes, envwire, envhost)
"""The modules the other environment gets, as their source files (one owner each), in the
order the bootstrap runs them: each after the shipped modules it imports."""


def _module_list() -> list[list[Any]]:
    packages = {"evaltui"}
    for module in SHIPPED:
        parts = module.__name__.split(".")
        packages.update(".".join(parts[:i]) for i in range(1, len(parts)))
    out: list[list[Any]] = [[name, None, None] for name in sorted(packages, key=len)]
    for module in SHIPPED:
        path = Path(str(module.__file__))
        out.append([module.__name__, str(path), path.read_text()])
    return out


def user_path() -> list[str]:
    """This process's ``sys.path`` minus Python's own and installed packages' dirs: where
    the user's modules are (the spec's workspace, PYTHONPATH). The other interpreter
    appends them to its own path, so its own packages (numpy 1.x) still win."""
    installed = {os.path.realpath(p) for p in (
        *sysconfig.get_paths().values(), *site.getsitepackages(), site.getusersitepackages(),
        sys.prefix, sys.base_prefix, sys.exec_prefix)}
    out = []
    for entry in sys.path:
        real = os.path.realpath(entry or os.getcwd())
        if os.path.isdir(real) and not any(real == p or real.startswith(p + os.sep)
                                           for p in installed) and real not in out:
            out.append(real)
    return out


def boot_message(mode: str, impl: str, *, params: dict[str, Any] | None = None,
                 episodes: list[Any] | None = None) -> bytes:
    """The framed boot message for ``mode`` ``describe`` or ``host``."""
    body = json.dumps({"mode": mode, "impl": impl, "params": params or {},
                       "episodes": episodes, "parent": os.getpid(), "path": user_path(),
                       "modules": _module_list()}).encode()
    return struct.pack("!Q", len(body)) + body
