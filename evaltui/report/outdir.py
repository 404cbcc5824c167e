"""The report's output directory: refused, replaced or made, and written all at once.

A report is built in a fresh sibling directory and moved into place only when it is
complete, so a crash or an error mid-way leaves the old report (or nothing) where the
user looks, never half a site. An existing directory is replaced only if it is empty or
an earlier report of the same run or set (it holds :data:`MARKER`, which names what it
is the report of); another run's report, or anything else, needs ``force``. The run dir
itself, or a directory holding it, is never replaced: that would delete the source.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from evaltui import __version__
from evaltui.rundir.jsonfiles import read_json_object

MARKER = ".evaltui-report"
"""A file at the root of every report: what tells a report from any other directory."""


class OutputDirError(ValueError):
    """The output directory cannot be written (bad input: exit 2, nothing written)."""


def check_output(out: Path, *, force: bool, sources: Sequence[Path],
                 of: str | None = None) -> None:
    """Raise OutputDirError if ``out`` may not be (re)written; ``of`` (``run ID``,
    ``set ID``) is what the new report is of: an earlier report of something else is not
    silently replaced."""
    out = out.expanduser().absolute()
    resolved = out.resolve()
    for source in sources:
        src = Path(source).resolve()
        if src == resolved or src.is_relative_to(resolved):
            raise OutputDirError(f"{out} holds the run dir {src}; writing the report there "
                                 "would delete it")
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink():
        raise OutputDirError(f"{out} is a symlink; give the directory it points to")
    if not out.is_dir():
        raise OutputDirError(f"{out} exists and is not a directory")
    if force or not any(out.iterdir()):
        return
    if (out / MARKER).is_file():
        earlier = _report_of(out)
        if of is None or earlier is None or earlier == of:
            return
        raise OutputDirError(f"{out} holds the report of {earlier}, not {of}; give another "
                             "-o, or --force to replace it")
    raise OutputDirError(f"{out} exists and is not an evaltui report (no {MARKER}); "
                         "give --force to replace it")


def _report_of(out: Path) -> str | None:
    """What the report at ``out`` is of (None: a report from before the marker said)."""
    of = (read_json_object(out / MARKER) or {}).get("of")
    return of if isinstance(of, str) else None


def publish(out: Path, build: Callable[[Path], None], *, kind: str, force: bool,
            sources: Sequence[Path], of: str | None = None) -> Path:
    """Build a site with ``build(tmp_dir)`` and put it at ``out``; return ``out``.

    ``kind`` (``run`` or ``set``) is recorded in the marker. On any error the partial
    build is removed and ``out`` is left as it was.
    """
    check_output(out, force=force, sources=sources, of=of)
    out = out.expanduser().absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".building", dir=out.parent))
    try:
        build(tmp)
        (tmp / MARKER).write_text(json.dumps({"kind": kind, "of": of,
                                               "evaltui": __version__}) + "\n")
        os.chmod(tmp, 0o755)  # mkdtemp makes it 0700; a report is meant to be shared
        _swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _swap_in(new: Path, out: Path) -> None:
    if not out.exists():
        os.replace(new, out)
        return
    old = out.parent / f".{out.name}.{os.getpid()}.old"
    os.replace(out, old)
    try:
        os.replace(new, out)
    except BaseException:
        os.replace(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)
