"""What a command's RUN or SET argument names: a run dir, a set dir, a run id or a set id.

``report`` and ``export`` take either; ``show``, ``compare``, ``verify``, ``open`` a run
(:func:`evaltui.results.runrows.resolve_run_dir`); the ``set`` commands a set
(:func:`evaltui.sets.setdir.resolve_set`). Each says what it could not find in one line,
exit 2 (docs/cli.md).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Literal

from evaltui.results.runrows import RunDirError, resolve_run_dir
from evaltui.rundir.layout import is_run_id
from evaltui.sets.setdir import SetDirError, resolve_set

RefKind = Literal["run", "set"]


class RefError(ValueError):
    """Neither a run nor a set by that name."""


def add_outputs_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--outputs", help="outputs root for run and set ids (default "
                   "$EVALTUI_OUTPUTS or ./outputs)")


def resolve_run_or_set(ref: str, outputs: str | os.PathLike[str] | None
                       ) -> tuple[RefKind, Path]:
    """``("set", dir)`` for a set dir or set id, else ``("run", dir)`` for a run dir or id."""
    try:
        return "set", resolve_set(ref, outputs)
    except SetDirError:
        pass
    try:
        return "run", resolve_run_dir(ref, outputs=outputs)
    except RunDirError as exc:
        if Path(ref).expanduser().exists() or is_run_id(ref):
            raise RefError(str(exc)) from None
        raise RefError(f"{ref!r} is neither a run (a run dir or a run id, YYYYmmdd_HHMMSS) "
                       "nor a set (a set dir or a set id) under the outputs root") from None
