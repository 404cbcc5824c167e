"""The hosted-nodeset wire after the handshake: frames on a socket, packed or pickled.

Frames use :mod:`multiprocessing.connection`'s framing (a 4-byte big-endian length, then
the payload), so the handshake (:mod:`evaltui.engine.hosting.channel`) runs on a ``Connection``
and the same socket then carries frames read here with one ``recv_into`` per frame
where the Connection made two reads plus a ``poll``. A payload's first byte says what
it is:

- ``c`` a packed node call: ``!dII`` (timeout, NaN for none; op and layout lengths),
  the op name, the layout and the data of the packed inputs (:mod:`.packing`);
- ``r`` a packed ``ok`` answer: ``!I`` layout length, layout, data;
- ``p`` anything else, pickled: a request ``(kind, name, payload, timeout)`` or an
  answer ``("ok", value)`` / ``("error", type, message, traceback)``.

Only authenticated peers get here (the handshake comes first), so unpickling ``p``
frames is as safe as it was with ``Connection.recv``; ``c``/``r`` frames are never
unpickled at all.
"""

from __future__ import annotations

import math
import os
import pickle
import select
import socket
import struct
from multiprocessing.connection import Connection
from typing import Any

from evaltui.engine.hosting.packing import Packed, pack

_LENGTH = struct.Struct("!i")
_CALL = struct.Struct("!dII")
_REPLY = struct.Struct("!I")
_BUFFER_BYTES = 1 << 16
KIND_CALL, KIND_REPLY, KIND_PICKLE = ord("c"), ord("r"), ord("p")
_CALL_KIND, _REPLY_KIND, _PICKLE_KIND = b"c", b"r", b"p"


class FrameSocket:
    """A connected socket read and written frame by frame (not thread-safe)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = bytearray(_BUFFER_BYTES)
        self._view = memoryview(self._buf)
        self._start = self._end = 0
        self._poller: select.poll | None = None
        self._poll_ms = -1

    @classmethod
    def from_connection(cls, conn: Connection) -> FrameSocket:
        """Take over an authenticated Connection's socket (the Connection is closed)."""
        sock = socket.socket(fileno=os.dup(conn.fileno()))
        conn.close()
        sock.setblocking(True)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            # One write per frame already; no Nagle delay on top of it.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock)

    def fileno(self) -> int:
        return self.sock.fileno()

    def set_recv_timeout(self, seconds: float | None) -> None:
        """Wait for each read in ``poll`` (POLLIN), up to ``seconds`` (None: no limit).

        For a side that blocks until its answer comes (a client): a reader blocked inside
        ``recv`` on a unix stream socket is also woken whenever its peer reads what it
        sent (the read frees write space, and that wake-up reaches every waiter on the
        socket), so a ``recv`` waiter wakes twice per call, the first time for nothing.
        A ``poll`` waiter asked for POLLIN only is not woken by it: 1.8 -> 1.0 context
        switches per call, one wake-up less for the kernel to deliver across CPUs.
        """
        self._poller = select.poll()
        self._poller.register(self.sock.fileno(), select.POLLIN)
        self._poll_ms = -1 if seconds is None else max(math.ceil(seconds * 1000), 1)

    def send(self, *parts: bytes) -> None:
        """One frame made of ``parts`` (joined: one write)."""
        frame = b"".join(parts)
        self.sock.sendall(_LENGTH.pack(len(frame)) + frame)

    def buffered(self) -> bool:
        """Whether a whole frame is already read and waiting here."""
        avail = self._end - self._start
        return avail >= 4 and avail >= 4 + _LENGTH.unpack_from(self._buf, self._start)[0]

    def recv(self) -> bytearray:
        """The next frame's payload (a fresh buffer); EOFError once the peer closed.

        With a receive timeout set, raises TimeoutError when it passes.
        """
        while True:
            avail = self._end - self._start
            if avail >= 4:
                size = _LENGTH.unpack_from(self._buf, self._start)[0]
                if size < 0:
                    raise ValueError("malformed frame length")
                begin = self._start + 4
                if avail >= 4 + size:
                    self._start = begin + size
                    if self._start == self._end:
                        self._start = self._end = 0
                    return self._buf[begin:begin + size]
                if 4 + size > len(self._buf):
                    return self._recv_large(size, begin)
            if self._start:
                self._buf[:avail] = self._buf[self._start:self._end]
                self._start, self._end = 0, avail
            self._end += self._read_into(self._view[self._end:])

    def _recv_large(self, size: int, begin: int) -> bytearray:
        frame = bytearray(size)
        got = self._end - begin
        frame[:got] = self._buf[begin:self._end]
        self._start = self._end = 0
        view = memoryview(frame)
        while got < size:
            got += self._read_into(view[got:])
        return frame

    def _read_into(self, view: memoryview) -> int:
        if self._poller is not None and not self._poller.poll(self._poll_ms):
            raise TimeoutError("no frame within the receive timeout")
        n = self.sock.recv_into(view)
        if n == 0:
            raise EOFError("the peer closed the connection")
        return n

    def close(self) -> None:
        self.sock.close()


# ---- requests (client -> host) -------------------------------------------------------------

def request_parts(kind: str, name: str | None, payload: Any,
                  timeout: float | None) -> tuple[bytes, ...]:
    """A request's frame parts: packed if it is a node call with packable inputs."""
    if kind == "call" and type(payload) is dict and name is not None:
        packed = pack(payload)
        if packed is not None:
            layout, data = packed
            op = name.encode()
            head = _CALL.pack(math.nan if timeout is None else timeout, len(op), len(layout))
            return _CALL_KIND, head, op, layout, data
    return _PICKLE_KIND, pickle.dumps((kind, name, payload, timeout),
                                      protocol=pickle.HIGHEST_PROTOCOL)


def decode_request(frame: bytearray) -> Any:
    """``(kind, name, payload, timeout)``; a packed call's payload is a :class:`Packed`."""
    if frame[0] == KIND_CALL:
        timeout, op_len, layout_len = _CALL.unpack_from(frame, 1)
        at = 1 + _CALL.size
        op = bytes(frame[at:at + op_len]).decode()
        at += op_len
        layout = bytes(frame[at:at + layout_len])
        data = memoryview(frame)[at + layout_len:]
        return ("call", op, Packed.from_wire(layout, data),
                None if math.isnan(timeout) else timeout)
    if frame[0] == KIND_PICKLE:
        return pickle.loads(memoryview(frame)[1:])
    raise ValueError(f"unknown frame kind {frame[0]!r}")


# ---- answers (host -> client) --------------------------------------------------------------

def answer_parts(message: tuple[Any, ...]) -> tuple[bytes, ...]:
    """An answer's frame parts: ``("ok", dict)`` packed when it can be, else pickled."""
    if message[0] == "ok" and type(message[1]) is dict:
        packed = pack(message[1])
        if packed is not None:
            layout, data = packed
            return _REPLY_KIND, _REPLY.pack(len(layout)), layout, data
    return _PICKLE_KIND, pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def decode_answer(frame: bytearray) -> tuple[Any, ...]:
    if frame[0] == KIND_REPLY:
        (layout_len,) = _REPLY.unpack_from(frame, 1)
        at = 1 + _REPLY.size
        layout = bytes(frame[at:at + layout_len])
        return ("ok", Packed.from_wire(layout, memoryview(frame)[at + layout_len:]).unpack())
    if frame[0] == KIND_PICKLE:
        return tuple(pickle.loads(memoryview(frame)[1:]))
    raise ValueError(f"unknown frame kind {frame[0]!r}")
