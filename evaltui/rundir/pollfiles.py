"""Whether a reader of run dirs polls instead of waiting on inotify.

inotify (what watchfiles uses on Linux) sees only the writes this machine's kernel makes:
on a filesystem the nodes of a cluster share (NFS, CIFS, Lustre, GPFS, ...) an episode
another node writes raises no event here, and a reader that waits on events never sees
it. ``EVALTUI_POLL_FILES`` (:mod:`evaltui.contract.settings`) says what readers do: ``on`` polls,
``off`` trusts inotify, ``auto`` (the default) polls where the watched path's filesystem
type, read from ``/proc/mounts`` (longest mount point above the path), is a network or
cluster one. Where the type cannot be read (no ``/proc``: macOS), ``auto`` trusts events.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from evaltui.contract.settings import settings

log = logging.getLogger(__name__)

POLL_DELAY_MS = 500
"""How often a polling reader looks (watchfiles' ``poll_delay_ms``)."""
MODES = ("auto", "on", "off")
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "lustre", "gpfs", "beegfs", "ceph",
    "glusterfs", "ocfs2", "gfs2", "afs", "9p", "panfs", "wekafs", "orangefs", "pvfs2",
    "fuse.sshfs", "fuse.ceph", "fuse.glusterfs", "fuse.beegfs", "fuse.juicefs", "fuse.s3fs",
    "fuse.gcsfuse", "fuse.rclone", "fuse.lizardfs", "fuse.moosefs", "fuse.mfs",
})
"""Filesystem types (as /proc/mounts names them) whose remote writes inotify misses."""
_warned: set[str] = set()


def poll_mode() -> str:
    """``EVALTUI_POLL_FILES`` as one of :data:`MODES`; a value that is none of them is
    warned about once and read as ``auto``."""
    value = (settings().poll_files or "auto").lower()
    if value in MODES:
        return value
    if value not in _warned:
        _warned.add(value)
        log.warning("EVALTUI_POLL_FILES=%r is not auto, on or off: reading it as auto", value)
    return "auto"


def filesystem_type(path: str | os.PathLike[str], mounts: str | None = None) -> str | None:
    """The type of the filesystem holding ``path`` (its nearest existing parent, links
    resolved), from ``mounts`` (the text of /proc/mounts; read when None); None where it
    cannot be read."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            return None
    target = Path(path).absolute()
    while not target.exists() and target != target.parent:
        target = target.parent
    return mount_type(os.path.realpath(target), mounts)


def mount_type(where: str, mounts: str) -> str | None:
    """The type of the mount holding the absolute, resolved path ``where``: the longest
    mount point of ``mounts`` (/proc/mounts' text) above it, the later of equal ones."""
    best, best_type = "", None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = _unescape(parts[1])
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):  # a later mount over the same point wins
            best, best_type = point, parts[2]
    return best_type


def is_network_filesystem(fs_type: str | None) -> bool:
    return fs_type is not None and (fs_type in NETWORK_FILESYSTEMS
                                    or fs_type.split(".")[0] in NETWORK_FILESYSTEMS)


def should_poll(path: str | os.PathLike[str], mounts: str | None = None) -> bool:
    """Whether a reader of ``path`` must poll (see the module's doc)."""
    mode = poll_mode()
    if mode != "auto":
        return mode == "on"
    return is_network_filesystem(filesystem_type(path, mounts))


def _unescape(field: str) -> str:
    """/proc/mounts writes a space, tab, newline and backslash in a path as octal."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field
