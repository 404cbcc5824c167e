"""Authenticated process-to-process channels: URLs, secrets and the HMAC handshake.

Hosted nodesets are addressed by URL (DESIGN §5, ``shared_urls.json``)::

    evaltui+unix:///tmp/evaltui-20261129_103947-x1y2/policy.sock
    evaltui+tcp://127.0.0.1:40123

A channel is a ``multiprocessing.connection`` Listener/Client pair. Before either side
unpickles anything, both prove they hold the same secret: a mutual HMAC-SHA256
challenge-response over raw byte messages (``send_bytes``/``recv_bytes`` with a size
cap, never ``recv``). We do the challenge ourselves rather than passing ``authkey`` to
``Listener`` because the stdlib version (a) uses HMAC-MD5 on Python 3.11 and (b) runs
inside ``Listener.accept()`` with no timeout, so one silent peer would stall every
later connection; here each handshake runs with a deadline in its own thread.

Secrets: a run makes a random per-run secret (:func:`new_secret`) and hands it to its
own hosts and workers through their inherited control pipe (never argv, environment or
disk). Nodesets hosted for several runs (the scheduler's) use the per-host secret in the
state dir, :func:`host_secret` (``hosting.key``, mode 0600).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from contextlib import suppress
from dataclasses import dataclass, field
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from urllib.parse import urlsplit

from evaltui.rundir.layout import state_dir

UNIX_SCHEME = "evaltui+unix"
TCP_SCHEME = "evaltui+tcp"
HOST_SECRET_FILENAME = "hosting.key"
HANDSHAKE_TIMEOUT_SEC = 5.0

_HELLO = b"evaltui-channel-2:"
"""Version 2: after the handshake, frames of :mod:`evaltui.engine.hosting.wire` (packed calls)."""
_HELLO_FAMILY = b"evaltui-channel-"
_NONCE_BYTES = 32
_MAX_HANDSHAKE_MESSAGE = 256
_DENIED = b"denied"


class ChannelError(ConnectionError):
    """A channel's peer cannot be reached (no socket there, connection refused)."""


class ChannelURLError(ValueError):
    """A channel URL is malformed."""


@dataclass(frozen=True)
class Address:
    """A parsed channel URL: the ``multiprocessing.connection`` family and address."""

    family: str
    address: str | tuple[str, int]

    @property
    def url(self) -> str:
        if self.family == "AF_UNIX":
            return f"{UNIX_SCHEME}://{self.address}"
        assert isinstance(self.address, tuple)
        host, port = self.address
        return f"{TCP_SCHEME}://{host}:{port}"


@dataclass(frozen=True)
class SharedEndpoint:
    """Where a shared nodeset is hosted, and the secret its host expects.

    A replicated nodeset (one host per GPU) has every replica's URL in ``urls`` (``url``
    is the first); ``spread`` and ``board`` say how a worker picks one
    (:mod:`evaltui.engine.hosting.replicaclient`).
    """

    url: str
    secret: bytes = field(repr=False)
    urls: tuple[str, ...] = ()
    spread: str = "slot"
    board: str | None = None


def parse_url(url: str) -> Address:
    """``evaltui+unix:///abs/path.sock`` or ``evaltui+tcp://HOST:PORT`` to an Address."""
    parts = urlsplit(url)
    if parts.scheme == UNIX_SCHEME:
        if parts.netloc or not parts.path.startswith("/"):
            raise ChannelURLError(f"{url!r}: a unix URL needs an absolute socket path "
                               f"({UNIX_SCHEME}:///path/to.sock)")
        return Address("AF_UNIX", parts.path)
    if parts.scheme == TCP_SCHEME:
        try:
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or port is None:
            raise ChannelURLError(f"{url!r}: a tcp URL needs a host and a port "
                               f"({TCP_SCHEME}://127.0.0.1:PORT)")
        return Address("AF_INET", (parts.hostname, port))
    raise ChannelURLError(f"{url!r}: unknown scheme; use {UNIX_SCHEME}:// or {TCP_SCHEME}://")


def listen(url: str, backlog: int = 64) -> tuple[Listener, str]:
    """Bind a Listener at ``url``; returns it and its actual URL (a tcp port 0 is resolved).

    A stale unix socket file (left by a killed host) is replaced; the new one is 0600.
    """
    addr = parse_url(url)
    if addr.family == "AF_UNIX":
        path = Path(str(addr.address))
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if path.exists() and stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()
        listener = Listener(str(path), "AF_UNIX", backlog=backlog)
        os.chmod(path, 0o600)
        return listener, addr.url
    listener = Listener(addr.address, "AF_INET", backlog=backlog)
    host, port = listener.address
    return listener, Address("AF_INET", (host, port)).url


def dial(url: str, secret: bytes, timeout: float = HANDSHAKE_TIMEOUT_SEC) -> Connection:
    """Connect to ``url`` and authenticate both ways; the connection is ready to ``send``."""
    addr = parse_url(url)
    try:
        conn = Client(addr.address, addr.family)
    except OSError as exc:
        raise ChannelError(f"cannot connect to {url}: {exc}") from exc
    try:
        client_handshake(conn, secret, timeout)
    except BaseException:
        conn.close()
        raise
    return conn


def server_handshake(conn: Connection, secret: bytes,
                     timeout: float = HANDSHAKE_TIMEOUT_SEC) -> None:
    """The listening side of the mutual challenge; raises AuthenticationError on failure."""
    nonce = secrets.token_bytes(_NONCE_BYTES)
    conn.send_bytes(_HELLO + nonce)
    reply = _recv_raw(conn, timeout)
    proof, client_nonce = reply[:32], reply[32:]
    if len(client_nonce) != _NONCE_BYTES or not hmac.compare_digest(
            proof, _mac(secret, b"client", nonce)):
        conn.send_bytes(_DENIED)
        raise AuthenticationError("peer does not hold the channel secret")
    conn.send_bytes(_mac(secret, b"server", client_nonce))


def client_handshake(conn: Connection, secret: bytes,
                     timeout: float = HANDSHAKE_TIMEOUT_SEC) -> None:
    """The connecting side: answer the host's challenge, then check the host's answer."""
    hello = _recv_raw(conn, timeout)
    if not hello.startswith(_HELLO) or len(hello) != len(_HELLO) + _NONCE_BYTES:
        if hello.startswith(_HELLO_FAMILY):
            version = hello[len(_HELLO_FAMILY):].split(b":")[0].decode(errors="replace")
            raise AuthenticationError(
                f"the host speaks evaltui channel version {version}, this client "
                f"{_HELLO[len(_HELLO_FAMILY):-1].decode()}: restart the host with this "
                "version of evaltui")
        raise AuthenticationError("peer is not an evaltui channel")
    nonce = secrets.token_bytes(_NONCE_BYTES)
    conn.send_bytes(_mac(secret, b"client", hello[len(_HELLO):]) + nonce)
    answer = _recv_raw(conn, timeout)
    if answer == _DENIED:
        raise AuthenticationError("host refused the secret (wrong secret for this URL?)")
    if not hmac.compare_digest(answer, _mac(secret, b"server", nonce)):
        raise AuthenticationError("host does not hold the channel secret")


def _mac(secret: bytes, role: bytes, nonce: bytes) -> bytes:
    # The role tag stops a peer from reflecting our own challenge back at us.
    return hmac.new(secret, role + nonce, hashlib.sha256).digest()


def _recv_raw(conn: Connection, timeout: float) -> bytes:
    if not conn.poll(timeout):
        raise AuthenticationError(f"no handshake reply within {timeout} s")
    try:
        return conn.recv_bytes(_MAX_HANDSHAKE_MESSAGE)
    except (EOFError, OSError) as exc:
        raise AuthenticationError(f"handshake failed: {exc or type(exc).__name__}") from exc


# --- secrets -----------------------------------------------------------------------------


def new_secret() -> bytes:
    """A fresh random 32-byte secret (one per run)."""
    return secrets.token_bytes(32)


def host_secret(state: Path | None = None, *, create: bool = False) -> bytes:
    """The per-host secret in the state dir (``hosting.key``, hex, mode 0600).

    With ``create`` a missing key is made atomically (written whole to a temp file, then
    hard-linked into place, which fails if it exists), so racing processes agree on one.
    """
    if state is None:
        state = state_dir()
    path = Path(state) / HOST_SECRET_FILENAME
    if create and not path.exists():
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(new_secret().hex())
            with suppress(FileExistsError):  # another process won the race: use its key
                os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        raise ChannelError(f"no host secret at {path}: the process that hosts shared "
                           "nodesets creates it") from None
    if path.stat().st_mode & 0o077:
        raise ChannelError(f"{path} is readable by other users; chmod 600 it")
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise ChannelError(f"{path} does not hold a hex secret") from None
