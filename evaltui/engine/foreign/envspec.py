"""A nodeset's ``environment`` field (DESIGN §13): its forms, checked, one line each.

``{"python": PATH}`` an existing interpreter; ``{"requirements": [...], "python": "3.11"}``,
``{"requirements_file": PATH}`` or ``{"script": PATH}`` (a PEP 723 header): an environment
evaltui builds and caches (:mod:`.envcache`); ``{"command": [...], "python": "python3"}``: a
launcher prefix (``conda run --no-capture-output -n NAME``, ``apptainer exec img.sif``).
Relative paths are made absolute where the graph is read, so the run process (whatever its
working directory) finds the same files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

BUILT_FORMS = ("requirements", "requirements_file", "script")
FORMS = ("python", *BUILT_FORMS, "command")


class EnvironmentSpecError(ValueError):
    """The ``environment`` field is malformed; ``field`` is the key at fault ("" for all)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class NodesetEnvironment:
    """One checked ``environment``; ``form`` is the key that names what kind it is."""

    form: str
    python: str | None = None
    requirements: tuple[str, ...] = ()
    requirements_file: str | None = None
    script: str | None = None
    command: tuple[str, ...] = ()

    @property
    def built(self) -> bool:
        """Whether evaltui builds it (and so caches it)."""
        return self.form in BUILT_FORMS

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.form == "command":
            out["command"] = list(self.command)
        elif self.form == "requirements":
            out["requirements"] = list(self.requirements)
        elif self.form != "python":
            out[self.form] = getattr(self, self.form)
        if self.python is not None:
            out["python"] = self.python
        return out


def _path(value: str) -> str:
    return os.path.abspath(os.path.expanduser(value))


def _string(data: dict[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str) or not value.strip():
        raise EnvironmentSpecError(key, f"must be a non-empty string, got {value!r}")
    return value


def parse_environment(data: Any) -> NodesetEnvironment:
    """The ``environment`` JSON value, checked; EnvironmentSpecError names the key at fault."""
    if not isinstance(data, dict):
        raise EnvironmentSpecError("", f"must be an object with one of {list(FORMS)}, got "
                                   f"{type(data).__name__}")
    unknown = sorted(set(data) - set(FORMS))
    if unknown:
        raise EnvironmentSpecError(unknown[0], f"unknown field (known: {list(FORMS)})")
    forms = [f for f in FORMS[1:] if f in data]
    if len(forms) > 1:
        raise EnvironmentSpecError(forms[1], f"give one of {list(FORMS[1:])}, not "
                                   f"{forms[0]!r} and {forms[1]!r} together")
    python = _string(data, "python") if "python" in data else None
    if not forms:
        if python is None:
            raise EnvironmentSpecError("", f"needs one of {list(FORMS)}")
        return NodesetEnvironment("python", python=_path(python) if "/" in python else python)
    form = forms[0]
    if form == "requirements":
        reqs = data[form]
        if not isinstance(reqs, list) or not reqs or not all(
                isinstance(r, str) and r.strip() for r in reqs):
            raise EnvironmentSpecError(form, "must be a non-empty list of requirement strings "
                                       "(\"numpy<2\", \"gymnasium==0.29.1\")")
        return NodesetEnvironment(form, python=python, requirements=tuple(reqs))
    if form == "command":
        cmd = data[form]
        if not isinstance(cmd, list) or not cmd or not all(
                isinstance(c, str) and c for c in cmd):
            raise EnvironmentSpecError(form, "must be a non-empty list of strings (the "
                                       "launcher and its arguments, before the interpreter)")
        return NodesetEnvironment(form, python=python, command=tuple(cmd))
    path = _path(_string(data, form))
    if not os.path.isfile(path):
        raise EnvironmentSpecError(form, f"{path}: no such file")
    return NodesetEnvironment(form, python=python, **{form: path})
