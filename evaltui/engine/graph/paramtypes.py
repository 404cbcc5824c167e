"""Nodeset params checked against the constructor's annotations, before anything runs.

So ``--set policy.noise=abc`` is refused at submit (one line, exit 2) rather than dying
in the worker with a traceback; a user's own nodeset gets the same check. Each param
with an annotation that resolves is validated with pydantic (lax mode: ``1`` is a fine
``float``, ``"abc"`` is not); params whose annotation cannot be resolved are left to the
constructor.

A nodeset declares its params' constraints in two ways, both checked here (so ``eval``,
``submit``, the API and the TUI's form refuse a bad value before a run dir exists):
``Annotated[float, Field(ge=0, le=1)]`` in the constructor's signature (pydantic's
bounds, patterns, lengths...), and a ``check_params(cls, params)`` classmethod that gets
every param (defaults filled in) and raises ``ValueError`` for a bad combination; what
it returns, if anything (a line, or a list of lines), is a note the user sees at submit
(e.g. which renderer a benchmark found, and what a frame costs).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping
from typing import Annotated, Any, get_args, get_origin

from pydantic import TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from evaltui.engine.usererrors import one_line


class ParamTypeError(ValueError):
    """A param value does not fit its annotation; ``param`` names it."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param
        self.message = message


def check_param_types(cls: type, params: Mapping[str, Any]) -> None:
    """Raise ParamTypeError for the first param of ``cls(**params)`` of the wrong type."""
    init = cls.__init__  # type: ignore[misc]
    try:
        hints = typing.get_type_hints(init, include_extras=True)
    except Exception:  # an annotation naming something only a type checker sees
        hints = {}
    parameters = inspect.signature(init).parameters
    for name, value in params.items():
        hint = hints.get(name)
        if hint is None or hint is Any or name not in parameters:
            continue
        try:
            TypeAdapter(hint).validate_python(value)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = "".join(f"[{p}]" for p in err["loc"])
            # A value out of bounds names the bounds; a wrong type only the type.
            expects = _type_name(hint) + (_bounds_text(hint) if err["type"] in _BOUND_ERRORS
                                          else "")
            raise ParamTypeError(name, f"{err['msg']}{' at ' + where if where else ''} "
                                 f"(got {value!r}; {cls.__name__} expects {expects})") from None
        except Exception:  # pydantic cannot build a validator for this annotation
            continue


def check_declared_params(cls: type, params: Mapping[str, Any]) -> list[str]:
    """Call the nodeset's own ``check_params`` (if it has one) with every param, the
    constructor's defaults filled in; its ValueError becomes a ParamTypeError naming the
    param when the message starts with one (``"noise: must be ..."``), else ``params``.
    Returns the notes it returned (a line or a list of lines; none: ``[]``)."""
    check = getattr(cls, "check_params", None)
    if not callable(check):
        return []
    full = {p.name: p.default for p in inspect.signature(cls.__init__).parameters.values()
            if p.name != "self" and p.default is not inspect.Parameter.empty}
    full.update(params)
    try:
        said = check(full)
    except ValueError as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        name, sep, rest = message.partition(": ")
        if sep and name in full:
            raise ParamTypeError(name, rest) from None
        raise ParamTypeError("", message) from None
    except Exception as exc:  # a bug in the check itself: still one line, naming it
        raise ParamTypeError("", f"{cls.__name__}.check_params failed: {one_line(exc)}"
                             ) from None
    if said is None:
        return []
    return [str(said)] if isinstance(said, str) else [str(line) for line in said]


def _type_name(hint: Any) -> str:
    if get_origin(hint) is Annotated:
        return _type_name(get_args(hint)[0])
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _bounds_text(hint: Any) -> str:
    """`` >= 0 and <= 1`` for ``Annotated[float, Field(ge=0, le=1)]``; "" without bounds."""
    if get_origin(hint) is not Annotated:
        return ""
    bounds = [b for extra in get_args(hint)[1:] if isinstance(extra, FieldInfo)
              for b in _bounds(extra)]
    return f" {' and '.join(bounds)}" if bounds else ""


_BOUND_ERRORS = frozenset({
    "greater_than", "greater_than_equal", "less_than", "less_than_equal", "multiple_of",
    "too_short", "too_long", "string_too_short", "string_too_long", "string_pattern_mismatch"})


_BOUND_SIGNS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "multiple_of": "multiple of",
                "min_length": "length >=", "max_length": "length <=", "pattern": "matching"}


def _bounds(info: FieldInfo) -> list[str]:
    """``info``'s constraints as text: ``>= 0``, ``<= 1``."""
    out = []
    for meta in info.metadata:
        for attr, sign in _BOUND_SIGNS.items():
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{sign} {value}")
    return out
