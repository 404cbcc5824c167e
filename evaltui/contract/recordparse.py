"""Reading a run dir's JSON into its records: strictly (the first field at fault, in one
line) or leniently (a status read keeps what fits and says what it left out)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def problem(exc: ValidationError) -> str:
    """A validation error in one line: the first field at fault and what is wrong."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(file)"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def parse(model: type[M], data: object, name: str) -> tuple[M | None, str | None]:
    """``data`` (a parsed JSON file called ``name``) as ``model``: the record, or None and
    why it does not fit."""
    if data is None:
        return None, None
    try:
        return model.model_validate(data), None
    except ValidationError as exc:
        return None, f"{name} does not fit its schema: {problem(exc)}"


def parse_lenient(model: type[M], data: Mapping[str, Any]) -> tuple[M | None, frozenset[str]]:
    """``data`` as ``model``, keeping what it can: each top-level field that does not fit
    (a float where a timestamp string belongs, a nested record gone wrong) is left out, so it
    reads as its default, and named in the set returned. None only when a required field is
    missing or unusable. What a status read derives a run's state from."""
    kept, dropped = dict(data), set[str]()
    while True:
        try:
            return model.model_validate(kept), frozenset(dropped)
        except ValidationError as exc:
            bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]} & kept.keys()
            required = {n for n, f in model.model_fields.items() if f.is_required()}
            if not bad or bad & required:
                return None, frozenset(dropped | bad)
            dropped |= bad
            kept = {k: v for k, v in kept.items() if k not in bad}
