"""Run-dir layout: the outputs root, run ids and their dirs, episode dirs, the per-user state
dir.
"""

from __future__ import annotations

import os
import re
import stat
from datetime import datetime
from pathlib import Path

from evaltui.contract.records import (
    EPISODES_DIRNAME,
    RUNS_DIRNAME,
)
from evaltui.contract.settings import settings
from evaltui.rundir.errors import StateDirError

RUN_ID_RE = re.compile(r"[0-9]{8}_[0-9]{6}(?:_(?:[2-9]|[1-9][0-9]+))?")


"""``YYYYmmdd_HHMMSS`` with an optional collision suffix ``_2``, ``_3``, … (use fullmatch)."""


_EPISODE_DIR_RE = re.compile(r"ep([0-9]{4,})")


def now_iso() -> str:
    """Now as the run-dir records write times: ISO 8601, local time, milliseconds."""
    return datetime.now().astimezone().isoformat(timespec="milliseconds")


def outputs_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The outputs root: ``explicit``, else ``$EVALTUI_OUTPUTS``, else ``./outputs``."""
    raw = explicit if explicit is not None else (settings().outputs or "outputs")
    return Path(raw).expanduser().resolve()


def runs_root(outputs: Path) -> Path:
    """``outputs/eval_runs``."""
    return Path(outputs) / RUNS_DIRNAME


def state_dir() -> Path:
    """Per-user state dir (ledger, token, calibration), created with mode 0700 (raises
    StateDirError)."""
    current = settings()
    explicit, xdg = current.state_dir, current.xdg_state_home
    if explicit:
        path = Path(explicit).expanduser()
        source = "EVALTUI_STATE_DIR"
    elif xdg and os.path.isabs(xdg):  # the XDG spec says to ignore relative values
        path = Path(xdg) / "evaltui"
        source = "XDG_STATE_HOME"
    else:
        path = Path.home() / ".local" / "state" / "evaltui"
        source = "the default"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = path.resolve()
    except OSError as exc:
        raise StateDirError(exc.errno, f"cannot make the state dir {path} (from {source}): "
                            f"{exc.strerror or exc}") from None
    if path not in _private_dirs:
        make_private(path)
        _private_dirs.add(path)
    return path


PRIVATE_MODE = 0o600


"""Mode of every file in the state dir (DESIGN §11): the token, the ledger, pid files…"""


_private_dirs: set[Path] = set()


def make_private(path: Path) -> None:
    """Force ``path`` to 0700 and what is under it to 0700 (dirs) / 0600 (files).

    Run once per process per state dir: a dir made by an older version (or by hand, with
    the usual umask) is 0755 with 0644 files. Only what this user owns is changed, and a
    symlink is never followed.
    """
    uid = os.getuid()
    top = os.stat(path)
    if top.st_uid == uid and stat.S_IMODE(top.st_mode) != 0o700:
        os.chmod(path, 0o700)
    for dirpath, dirnames, filenames in os.walk(path):
        for name, want in [(d, 0o700) for d in dirnames] + [(f, PRIVATE_MODE) for f in filenames]:
            full = os.path.join(dirpath, name)
            try:
                st = os.lstat(full)
                if st.st_uid == uid and not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o077:
                    os.chmod(full, want if stat.S_ISDIR(st.st_mode) else
                             stat.S_IMODE(st.st_mode) & ~0o077)
            except OSError:
                continue  # gone in between, or not ours to change


def is_run_id(name: str) -> bool:
    """True if ``name`` is a well-formed run_id (so it is safe to join under eval_runs/)."""
    return isinstance(name, str) and RUN_ID_RE.fullmatch(name) is not None


def run_id_order(run_id: str) -> tuple[str, int]:
    """Sort key of run ids: the timestamp, then the collision suffix (``_2`` after the
    plain id)."""
    suffix = run_id[16:]
    return (run_id[:15], int(suffix) if suffix.isdigit() else 1)


def allocate_run_dir(outputs: Path, now: datetime | None = None) -> Path:
    """Create and return a fresh ``eval_runs/{run_id}`` dir.

    ``mkdir`` either creates the dir or fails, so two processes allocating in the same
    second get different suffixes without any lock.
    """
    stamp = now or datetime.now()
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone()  # run ids are local time
    base = stamp.strftime("%Y%m%d_%H%M%S")
    root = runs_root(outputs)
    root.mkdir(parents=True, exist_ok=True)
    suffix = 1
    while True:
        run_dir = root / (base if suffix == 1 else f"{base}_{suffix}")
        try:
            os.mkdir(run_dir)
        except FileExistsError:
            suffix += 1
            continue
        return run_dir


def episode_dir(run_dir: Path, index: int) -> Path:
    """``run_dir/episodes/ep{index:04d}``."""
    if index < 0:
        raise ValueError(f"episode index must be >= 0, got {index}")
    return Path(run_dir) / EPISODES_DIRNAME / f"ep{index:04d}"


def episode_index_from_dirname(name: str) -> int | None:
    """The index of an ``ep{NNNN}`` dir name, or None (also for non-canonical ``ep00012``)."""
    m = _EPISODE_DIR_RE.fullmatch(name)
    if m is None:
        return None
    index = int(m.group(1))
    # Only the canonical spelling, so that two dirs never claim the same index.
    return index if f"ep{index:04d}" == name else None
