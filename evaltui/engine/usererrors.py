"""A user's nodeset failing at import or construction, said in one line.

Writing one's own env, the likely mistakes are a SyntaxError, an exception at import and
a constructor that raises. What they need is not a 40-line engine traceback but where it
happened in *their* file, the exception and its message: that one line is what they get. The
traceback stays available: ``evaltui eval --verbose`` (which sets :data:`VERBOSE_ENV`)
prints it, and a worker or host that cannot build its nodeset writes it to run.log.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import traceback
from collections.abc import Mapping
from typing import Any

VERBOSE_ENV = "EVALTUI_VERBOSE"
"""Set (to anything but "" or "0"): print the traceback of a user-code error as well."""


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0")


def where(exc: BaseException) -> str | None:
    """``file:line`` of the error in the user's code: a SyntaxError's own position, else
    the deepest frame outside Python's import machinery and installed libraries (the
    deepest frame of all when every frame is theirs)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}" if exc.lineno else exc.filename
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith("<") and "importlib" not in f.filename]
    if not frames:
        return None
    libraries = {sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")}
    own = [f for f in frames if not any(f.filename.startswith(lib) for lib in libraries)]
    frame = (own or frames)[-1]
    return f"{frame.filename}:{frame.lineno}"


def one_line(exc: BaseException) -> str:
    """``file:line: Type: message`` (the message's first line; ``msg`` for a SyntaxError,
    whose str() repeats the position)."""
    text = exc.msg if isinstance(exc, SyntaxError) and exc.msg else str(exc)
    first = text.strip().splitlines()[0] if text.strip() else ""
    head = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    place = where(exc)
    return f"{place}: {head}" if place else head


def report_traceback(exc: BaseException) -> None:
    """Print ``exc``'s traceback on stderr when asked for (``--verbose``)."""
    if verbose():
        # the three-argument form: this module also runs in a nodeset's own environment,
        # on Python 3.8 (evaltui.engine.foreign.boot)
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)


class NodesetConstructorError(RuntimeError):
    """A nodeset's constructor raised; the message is one line, ``detail`` the traceback."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # Picklable (a Ray actor's error crosses processes): args alone lack ``detail``.
        return type(self), (str(self), self.detail)


def build_nodeset(name: str, cls: type, params: Mapping[str, Any]) -> Any:
    """``cls(**params)``; whatever the constructor raises becomes a NodesetConstructorError
    naming the nodeset, where it raised and why."""
    try:
        return cls(**params)
    except NodesetConstructorError:
        raise  # said already (a nodeset in its own environment: where it raised there)
    except Exception as exc:
        raise NodesetConstructorError(
            f"nodeset {name!r} ({cls.__name__}) failed to build: {one_line(exc)}",
            "".join(traceback.format_exception(exc)).rstrip()) from exc
