"""Nodeset params checked against the constructor's annotations, before anything runs.

So ``--set policy.noise=abc`` is refused at submit (one line, exit 2) rather than dying
in the worker with a traceback; a user's own nodeset gets the same check. Each param
with an annotation that resolves is validated with pydantic (lax mode: ``1`` is a fine
``float``, ``"abc"`` is not); params whose annotation cannot be resolved are left to the
constructor.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError


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
        hints = typing.get_type_hints(init)
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
            raise ParamTypeError(name, f"{err['msg']}{' at ' + where if where else ''} "
                                 f"(got {value!r}; {cls.__name__} expects "
                                 f"{_type_name(hint)})") from None
        except Exception:  # pydantic cannot build a validator for this annotation
            continue


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
