"""Opening files under a root without following a symlink out of it (DESIGN §11).

Run dirs and copied ep dirs come from other people and other processes: a symlink
planted in one (``ln -s /etc/passwd episodes/ep0002/log.jsonl``) must not make the API,
a CLI client or the TUI read what it points at. Every reader of a file it serves opens
it here, relative to a *root* it trusts (the outputs root for the API and the TUI, the
run or ep dir given on the command line for local CLI reads).

How: each path component is opened with ``O_NOFOLLOW`` relative to the directory
opened before it (``openat``), starting from the root. That alone refuses every
symlink, even one that stays inside; so when a component turns out to be a symlink the
whole path is resolved (``realpath``), checked to be inside the root, and the resolved
path is walked again, still with ``O_NOFOLLOW``: a symlink swapped in between the check
and the open is refused rather than followed. A path whose resolution leaves the root
raises :class:`LeavesRoot` (a PermissionError, so an ``except OSError`` that treats a
file as unreadable fails closed). Files are opened non-blocking and must be regular
files: a FIFO planted as ``log.jsonl`` cannot hang a reader.

Hard links cannot be told from the file they link (``protected_hardlinks`` keeps other
users from making them to files they cannot read).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import orjson

StrPath = str | os.PathLike[str]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_O_PATH = getattr(os, "O_PATH", 0)
_STAT_FLAGS = (_O_PATH or os.O_RDONLY | os.O_NONBLOCK) | os.O_NOFOLLOW | os.O_CLOEXEC
_SYMLINK_ERRNOS = (errno.ELOOP, errno.ENOTDIR)
"""What ``O_NOFOLLOW`` gives on a symlink: ELOOP as the last component, ENOTDIR with
``O_DIRECTORY`` (a plain file in the middle of a path gives ENOTDIR too)."""


class LeavesRoot(PermissionError):
    """A path under a root that resolves, through a symlink, outside that root."""

    def __init__(self, root: StrPath, rel: StrPath, where: str | None = None) -> None:
        self.root, self.rel = str(root), str(rel)
        target = f" (to {where})" if where else ""
        super().__init__(errno.EACCES,
                         f"{rel} is a symlink that leaves {root}{target}; not followed")


class NotRegularFile(OSError):
    """A path that names a FIFO, socket or device where a file was expected."""


# --- paths -------------------------------------------------------------------------------


class Root(str):
    """A root resolved once (``Root.of(path)``), for callers that open many files under
    it: every call with a plain path resolves the root again."""

    @classmethod
    def of(cls, path: StrPath) -> Root:
        return cls(os.path.realpath(os.fspath(path)))


def _real_root(root: StrPath) -> str:
    """The root as the kernel sees it: the root itself is trusted, symlinks and all."""
    return root if isinstance(root, Root) else os.path.realpath(os.fspath(root))


def _parts(root: StrPath, real_root: str, rel: StrPath) -> list[str]:
    """The components of ``rel`` below the root; ``rel`` may be absolute (then it must be
    lexically under ``root`` or its real path). ``..`` may not climb out of the root."""
    raw = os.fspath(rel)
    if os.path.isabs(raw):
        norm = os.path.normpath(raw)
        for base in (os.path.normpath(os.path.abspath(os.fspath(root))), real_root):
            if norm == base:
                return []
            if norm.startswith(base.rstrip(os.sep) + os.sep):
                raw = norm[len(base.rstrip(os.sep)) + 1:]
                break
        else:
            raise LeavesRoot(root, rel)
    norm = os.path.normpath(raw) if raw else "."
    if norm == ".":
        return []
    if norm == ".." or norm.startswith(".." + os.sep) or os.path.isabs(norm):
        raise LeavesRoot(root, rel)
    return [p for p in norm.split(os.sep) if p not in ("", ".")]


def _walk(real_root: str, parts: list[str], last_flags: int) -> int:
    """An fd of ``real_root/parts…``, each component opened without following symlinks."""
    fd = os.open(real_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            flags = last_flags if i == len(parts) - 1 else _DIR_FLAGS
            nxt = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = nxt
        if not parts and last_flags != _DIR_FLAGS:
            nxt = os.open(".", last_flags & ~os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_fd(root: StrPath, rel: StrPath, *, flags: int = _FILE_FLAGS) -> int:
    """A raw fd of ``root/rel`` opened with ``flags`` (``O_NOFOLLOW`` is added); raises
    :class:`LeavesRoot` if it resolves outside ``root``, else the usual OSError."""
    real_root = _real_root(root)
    parts = _parts(root, real_root, rel)
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = _walk(real_root, parts, flags)
    except OSError as exc:
        if exc.errno not in _SYMLINK_ERRNOS:
            raise
    else:
        if not _is_link(fd, flags):
            return fd
        os.close(fd)
    # Some component is a symlink (or a file where a dir was expected): where does it go?
    full = os.path.join(real_root, *parts)
    resolved = os.path.realpath(full)
    base = real_root.rstrip(os.sep) + os.sep
    if resolved != real_root and not resolved.startswith(base):
        raise LeavesRoot(root, rel, resolved)
    inner = [] if resolved == real_root else resolved[len(base):].split(os.sep)
    try:
        fd = _walk(real_root, inner, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symlink swapped in after the check
            raise LeavesRoot(root, rel) from None
        raise
    if _is_link(fd, flags):
        os.close(fd)
        raise LeavesRoot(root, rel)
    return fd


def _is_link(fd: int, flags: int) -> bool:
    """``O_PATH | O_NOFOLLOW`` opens a symlink itself rather than failing: look."""
    return bool(flags & _O_PATH) and stat.S_ISLNK(os.fstat(fd).st_mode)


# --- files -------------------------------------------------------------------------------


def _regular(fd: int, rel: StrPath) -> int:
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        os.close(fd)
        raise IsADirectoryError(errno.EISDIR, f"{rel} is a directory")
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegularFile(errno.EINVAL, f"{rel} is not a regular file")
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return fd


def open_file_fd(root: StrPath, rel: StrPath) -> int:
    """A read-only fd of the regular file ``root/rel`` (see the module docstring)."""
    return _regular(open_fd(root, rel), rel)


def open_inside(root: StrPath, rel: StrPath) -> BinaryIO:
    """``root/rel`` opened for binary reading, never through a symlink out of ``root``."""
    return os.fdopen(open_file_fd(root, rel), "rb")


def read_bytes_inside(root: StrPath, rel: StrPath) -> bytes:
    """The content of the regular file ``root/rel``."""
    with open_inside(root, rel) as f:
        return f.read()


def read_json_inside(root: StrPath, rel: StrPath) -> Any:
    """``root/rel`` parsed as JSON (``orjson.JSONDecodeError``, a ValueError, if invalid)."""
    return orjson.loads(read_bytes_inside(root, rel))


class NotAnObject(ValueError):
    """A JSON file whose top level is not an object (a run-dir record must be one)."""


def read_object_inside(root: StrPath, rel: StrPath) -> dict[str, Any]:
    """``root/rel`` as a JSON object: the one reader of a run dir's records (status reads,
    ``show``'s rows, ``verify``), so none follows a symlink out of the run dir. Raises
    FileNotFoundError or NotADirectoryError if it is absent, :class:`LeavesRoot` for a
    symlink out, ``orjson.JSONDecodeError`` or :class:`NotAnObject` (ValueErrors) if it
    holds no JSON object, OSError if it cannot be read."""
    obj = read_json_inside(root, rel)
    if not isinstance(obj, dict):
        raise NotAnObject(f"{rel} is not a JSON object")
    return obj


def object_inside_or_none(root: StrPath, rel: StrPath) -> dict[str, Any] | None:
    """:func:`read_object_inside`, or None where it raises (absent, a symlink out, no
    JSON object, unreadable)."""
    try:
        return read_object_inside(root, rel)
    except (OSError, ValueError):
        return None


def kind_or_outside(root: StrPath, rel: StrPath) -> str | None:
    """:func:`kind_inside`, with ``"outside"`` for a symlink out of ``root`` (present but
    unusable) and None for anything that cannot be looked at."""
    try:
        return kind_inside(root, rel)
    except LeavesRoot:
        return "outside"
    except OSError:
        return None


def kind_inside(root: StrPath, rel: StrPath) -> str | None:
    """``"file"``, ``"dir"``, ``"other"``, or None if ``root/rel`` does not exist;
    :class:`LeavesRoot` if it resolves outside ``root``."""
    try:
        fd = open_fd(root, rel, flags=_STAT_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        mode = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    return "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "other"


def check_inside(root: StrPath, rel: StrPath) -> None:
    """Raise :class:`LeavesRoot` if ``root/rel`` resolves outside ``root`` (a missing path,
    or one that never leaves, passes)."""
    kind_inside(root, rel)


@contextmanager
def dir_inside(root: StrPath, rel: StrPath) -> Iterator[int]:
    """An fd of the directory ``root/rel`` for ``os.scandir``/``openat``, closed after."""
    fd = open_fd(root, rel, flags=_DIR_FLAGS)
    try:
        yield fd
    finally:
        os.close(fd)


def list_dir_inside(root: StrPath, rel: StrPath) -> list[str]:
    """The names in the directory ``root/rel`` (FileNotFoundError if it is missing)."""
    with dir_inside(root, rel) as fd:
        return os.listdir(fd)


def within(root: StrPath, path: StrPath) -> Path:
    """``path`` relative to ``root`` if it lies (lexically) under it; LeavesRoot if not."""
    return Path(*_parts(root, _real_root(root), path))
