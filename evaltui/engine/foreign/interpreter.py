"""From a nodeset's ``environment`` to the command that starts its interpreter."""

from __future__ import annotations

import os
import shutil

from evaltui.engine.foreign.envcache import ensure_built
from evaltui.engine.foreign.envspec import NodesetEnvironment


class InterpreterMissing(FileNotFoundError):
    """The environment's interpreter (or launcher) is not there."""


def interpreter_argv(env: NodesetEnvironment, label: str) -> list[str]:
    """The argv prefix that runs Python in ``env`` (building it first if evaltui builds it)."""
    if env.built:
        return [str(ensure_built(env, label))]
    if env.form == "command":
        launcher = env.command[0]
        if shutil.which(launcher) is None:
            raise InterpreterMissing(f"the launcher {launcher!r} of {label} is not on PATH "
                                     "or not executable")
        return [*env.command, env.python or "python3"]
    assert env.python is not None
    if "/" not in env.python:
        found = shutil.which(env.python)
        if found is None:
            raise InterpreterMissing(f"the interpreter {env.python!r} of {label} is not on PATH")
        return [found]
    if not (os.path.isfile(env.python) and os.access(env.python, os.X_OK)):
        raise InterpreterMissing(f"the interpreter {env.python} of {label} does not exist or "
                                 "is not executable")
    return [env.python]
