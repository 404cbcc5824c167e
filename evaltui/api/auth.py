"""The API's bearer token: a file in the state dir (mode 0600), created on first start.

Every client on the machine (the CLI, ``evaltui run``, the attached TUI) reads the same
file, so nothing has to be configured; a remote client passes ``EVALTUI_TOKEN``.
Tokens are compared with ``hmac.compare_digest`` so a wrong guess learns nothing from
the time the answer takes.
"""

from __future__ import annotations

import errno
import hmac
import os
import secrets
import stat
from contextlib import suppress
from pathlib import Path

from evaltui.contract.settings import settings
from evaltui.rundir.layout import state_dir

TOKEN_FILENAME = "token"
TOKEN_ENV = "EVALTUI_TOKEN"
MIN_TOKEN_CHARS = 16


class TokenError(RuntimeError):
    """The token file cannot be created or is unusable."""


def token_path() -> Path:
    """``state_dir()/token``."""
    return state_dir() / TOKEN_FILENAME


def load_or_create_token(path: Path | None = None) -> str:
    """The token in ``path`` (default :func:`token_path`), creating it (0600) if absent.

    Created by hard-linking a complete temp file into place: two servers starting at
    once agree on one token, and no reader ever sees an empty file.
    """
    path = Path(path) if path is not None else token_path()
    existing = _read(path)
    if existing is not None:
        _tighten(path)
        return existing
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            data = token.encode() + b"\n"
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(tmp, path)
    except FileExistsError:
        token = _read(path) or ""
    except OSError as exc:  # a full or read-only state dir: said in one line, nothing left
        raise TokenError(f"cannot create the token file {path}: "
                         f"{exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    if len(token) < MIN_TOKEN_CHARS:
        raise TokenError(f"token file {path} holds no usable token (delete it to make a new one)")
    return token


def read_token(path: Path | None = None) -> str | None:
    """The client's token: ``$EVALTUI_TOKEN``, else the token file, else None."""
    env = settings().token
    if env:
        return env
    return _read(Path(path) if path is not None else token_path())


def token_matches(expected: str, authorization: str | None) -> bool:
    """True if an ``Authorization`` header carries ``Bearer {expected}`` (constant time)."""
    if not authorization:
        return False
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(expected.encode(), given.strip().encode("utf-8", "replace"))


def _read(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise TokenError(f"cannot read token file {path}: {exc}") from None
    if len(text) < MIN_TOKEN_CHARS:
        # Too short to be ours (or being written by hand): never accept a guessable token.
        raise TokenError(f"token file {path} holds no usable token (delete it to make a new one)")
    return text


def _tighten(path: Path) -> None:
    """Keep the token owner-only even if someone loosened the file's mode."""
    with suppress(OSError):
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            os.chmod(path, 0o600)
