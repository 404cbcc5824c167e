"""Where the reservation ledger lives: one per machine, shared by every Unix user.

DESIGN §12: the ledger is machine-wide, so two users' schedulers on one GPU box see each
other's reservations. ``evaltui ledger setup`` (as root) makes the shared directory:
:data:`SHARED_LEDGER_DIR` (or ``--dir``), owned by root and a group (``evaltui``),
mode 3770 (setgid, so its files get the group; group-writable; sticky, so only a file's
owner can replace or delete it; nobody else), and its ``ledger.lock`` owned by root. Every
scheduler whose user is in that group then keeps its reservations there
(``EVALTUI_LEDGER_DIR`` names another directory). Where it is not set up, or not
writable by this user, the ledger is the per-user one in the state dir, as before, and
the scheduler says so once. ``EVALTUI_LEDGER_DIR=per-user`` asks for the per-user one
(the test suite's isolation).
"""

from __future__ import annotations

import grp
import logging
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from evaltui.contract.settings import settings
from evaltui.rundir.layout import state_dir
from evaltui.scheduler.admission.ledgerfiles import LOCK_FILENAME

SHARED_LEDGER_DIR = Path("/var/lib/evaltui/ledger")
DEFAULT_GROUP = "evaltui"
DIR_MODE = 0o3770
FILE_MODE = 0o640
"""A user's entry file in the shared ledger: written by its owner, read by the group."""
PER_USER = "per-user"

log = logging.getLogger(__name__)
_said: set[str] = set()


@dataclass(frozen=True)
class LedgerPlace:
    """The directory of the ledger, whether it is the machine-wide one, and why not."""

    directory: Path
    shared: bool
    note: str | None = None
    """Why the per-user ledger is used (said once per process)."""


def _usable(path: Path) -> str | None:
    """None if this user can keep a ledger in ``path``; else why not."""
    if not path.is_dir():
        return "is not set up"
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        return "is not writable by this user (not in its group?)"
    if not path.stat().st_mode & stat.S_ISVTX and path.stat().st_uid != os.getuid():
        # Without the sticky bit any member of the group could delete another's entries.
        return "is not protected against the group's users (no sticky bit: set up by an " \
               "older evaltui)"
    return None


def ledger_place() -> LedgerPlace:
    """The ledger's directory for this process (see the module doc)."""
    wanted = settings().ledger_dir  # EVALTUI_LEDGER_DIR
    if wanted == PER_USER:
        return LedgerPlace(state_dir(), shared=False)
    shared = Path(wanted).expanduser() if wanted else SHARED_LEDGER_DIR
    why = _usable(shared)
    if why is None:
        return LedgerPlace(shared, shared=True)
    where = state_dir()
    return LedgerPlace(where, shared=False, note=(
        f"reservation ledger: per-user, in {where}: the machine-wide one ({shared}) {why}; "
        "schedulers of other users on this machine cannot see these reservations "
        "(`sudo evaltui ledger setup` makes it)"))


def say_once(place: LedgerPlace) -> None:
    """Log the place's note, once per process and place."""
    if place.note and place.note not in _said:
        _said.add(place.note)
        log.warning("%s", place.note)


def setup_shared_dir(directory: Path, group: str) -> str:
    """Make ``directory`` the machine-wide ledger's (root only); what was done, one line.

    Raises PermissionError (not root, or a parent dir other users cannot search) or
    KeyError (no such group)."""
    if os.geteuid() != 0:
        raise PermissionError("evaltui ledger setup needs root (it makes a directory owned "
                              "by root and a group)")
    gid = grp.getgrnam(group).gr_gid
    directory = directory.absolute()
    directory.mkdir(parents=True, exist_ok=True)
    for parent in directory.parents:  # the users must be able to reach it
        if not parent.stat().st_mode & stat.S_IXOTH:
            raise PermissionError(f"{parent} is not searchable by other users, so they "
                                  f"could not reach {directory}; chmod o+x it or pick "
                                  "another --dir")
    os.chown(directory, 0, gid)
    os.chmod(directory, DIR_MODE)
    lock = directory / LOCK_FILENAME
    if lock.is_symlink() or (lock.exists() and not lock.is_file()) or \
            (lock.exists() and lock.stat().st_uid != 0):
        os.rename(lock, directory / f".{LOCK_FILENAME}.replaced.{int(time.time())}")
    fd = os.open(lock, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    os.fchown(fd, 0, gid)
    os.fchmod(fd, FILE_MODE)  # root's, so no user can swap it and split the lock
    os.close(fd)
    for child in directory.iterdir():  # files of an earlier setup: the group's too
        if child.is_file() and not child.is_symlink() and child.name.endswith(".json"):
            os.chown(child, -1, gid)
            os.chmod(child, FILE_MODE)
    return (f"machine-wide reservation ledger at {directory} (root:{group}, mode "
            f"{DIR_MODE:o}); users of group {group} share it "
            f"(usermod -aG {group} USER)"
            + ("" if directory == SHARED_LEDGER_DIR else
               f"; set EVALTUI_LEDGER_DIR={directory} for their schedulers"))
