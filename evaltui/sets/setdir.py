"""The set dir, ``outputs/eval_sets/{set_id}/``: set.json, read and written atomically.

set.json (:class:`~evaltui.contract.setspec.SetRecord`) holds the set file as given and every
member's key, axes, run and state. It is written with the project's atomic JSON writer
(a reader sees the old file or the new one), so a crash of ``set run`` loses at most the
last state change, which the next ``set run`` reads back from the members' run dirs.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import ValidationError

from evaltui.contract.setspec import SET_FILENAME, SETS_DIRNAME, SetRecord
from evaltui.rundir.jsonfiles import read_json, write_json_atomic
from evaltui.rundir.layout import outputs_root

LOCK_FILENAME = ".lock"
"""flock'ed by the one process running the set."""


class SetDirError(ValueError):
    """A set reference that names no readable set dir (bad input: exit 2)."""


def sets_root(outputs: str | os.PathLike[str] | None = None) -> Path:
    """``outputs/eval_sets``."""
    return outputs_root(outputs) / SETS_DIRNAME


def set_dir(set_id: str, outputs: str | os.PathLike[str] | None = None) -> Path:
    return sets_root(outputs) / set_id


def read_set(path: Path) -> SetRecord:
    """The set.json of set dir ``path`` (raises SetDirError)."""
    file = Path(path) / SET_FILENAME
    try:
        return SetRecord.model_validate(read_json(file))
    except FileNotFoundError:
        raise SetDirError(f"{path} has no {SET_FILENAME}: not a set dir") from None
    except (OSError, ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0]
        raise SetDirError(f"{file}: unreadable ({first})") from None


def write_set(path: Path, record: SetRecord) -> None:
    """Write set.json atomically (the set dir is made if needed)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path / SET_FILENAME, record.model_dump(mode="json"))


def resolve_set(ref: str, outputs: str | os.PathLike[str] | None = None) -> Path:
    """The set dir ``ref`` names: a directory holding set.json, else a set id."""
    path = Path(ref).expanduser()
    if (path / SET_FILENAME).is_file():
        return path.resolve()
    candidate = set_dir(ref, outputs) if "/" not in ref else None
    if candidate is not None and (candidate / SET_FILENAME).is_file():
        return candidate
    raise SetDirError(f"{ref!r} is neither a set dir nor a set id under {sets_root(outputs)}")


def list_sets(outputs: str | os.PathLike[str] | None = None) -> list[SetRecord]:
    """Every readable set under the outputs root, by set id."""
    root = sets_root(outputs)
    found: list[SetRecord] = []
    for child in sorted(root.iterdir()) if root.is_dir() else ():
        try:
            found.append(read_set(child))
        except SetDirError:
            continue
    return found


class SetBusy(RuntimeError):
    """Another process is running this set (``set run``/``resume``/``watch``)."""


@contextmanager
def hold_set(path: Path) -> Iterator[None]:
    """Hold the set dir for one runner: two at once would submit a member twice."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path / LOCK_FILENAME, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SetBusy(f"set {path.name} is being run by another process "
                          f"(it holds {path / LOCK_FILENAME})") from None
        yield
    finally:
        os.close(fd)  # releases the flock
