"""A set file, checked and expanded, with the set dir it belongs in: what every set
command (and the API's set routes) starts from.

:func:`plan_file` reads a set file; :func:`plan_record` rebuilds the plan of an existing
set from its set.json (the file as given and its directory), for ``set resume`` and
``set cancel``. Both raise SetFileError naming the field; nothing is written here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaltui.contract.setspec import SetFile, SetRecord, load_set_file, parse_set_file
from evaltui.sets.checking import check_members
from evaltui.sets.expansion import Expansion, expand
from evaltui.sets.setdir import set_dir


@dataclass(frozen=True)
class SetPlan:
    """A set ready to be run: its id, its dir, its members."""

    set_id: str
    path: Path
    """The set dir, ``outputs/eval_sets/{set_id}``."""
    file: dict[str, Any]
    """The set file as given (set.json's ``file``)."""
    expansion: Expansion
    warnings: list[str] = field(default_factory=list)

    @property
    def setfile(self) -> SetFile:
        return self.expansion.setfile


def plan_file(path: Path, outputs: str | os.PathLike[str] | None = None, *,
              check: bool = True, checkpoints: Sequence[Path] | None = None) -> SetPlan:
    """The plan of the set file at ``path``; ``check`` holds every member to its graph
    (imports the nodesets: what ``set run`` does before it writes anything)."""
    setfile, data = load_set_file(Path(path))
    return _plan(setfile, data, Path(path).resolve().parent, outputs, check, checkpoints)


def plan_data(data: Any, base_dir: Path, outputs: str | os.PathLike[str] | None = None, *,
              check: bool = True) -> SetPlan:
    """The plan of a set file given as data (an API body), paths relative to ``base_dir``."""
    return _plan(parse_set_file(data), data, Path(base_dir), outputs, check, None)


def plan_record(record: SetRecord, outputs: str | os.PathLike[str] | None = None, *,
                check: bool = False, checkpoints: Sequence[Path] | None = None) -> SetPlan:
    """The plan of a set from its set.json."""
    return _plan(parse_set_file(record.file), record.file, Path(record.base_dir), outputs,
                 check, checkpoints)


def _plan(setfile: SetFile, data: Any, base_dir: Path, outputs: str | os.PathLike[str] | None,
          check: bool, checkpoints: Sequence[Path] | None) -> SetPlan:
    set_id = setfile.name
    expansion = expand(setfile, base_dir, set_id=set_id, checkpoints=checkpoints)
    warnings: list[str] = []
    if check:
        warnings = check_members(expansion)
    return SetPlan(set_id, set_dir(set_id, outputs), dict(data), expansion, warnings)
