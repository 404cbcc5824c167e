"""The hosted-nodeset wire: frames, packed calls and answers, pickled fallbacks (real hosts)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Listener
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from faulty_nodesets import BatchedStepPolicy

from evaltui.engine.hosting.channel import dial, new_secret
from evaltui.engine.hosting.host import NodesetServer
from evaltui.engine.hosting.hostprocess import HostConfig, HostProcess
from evaltui.engine.hosting.proxy import RemoteError, connect
from evaltui.engine.hosting.wire import KIND_CALL, FrameSocket, decode_answer, request_parts
from evaltui.engine.nodes import NodeSet, node


class Probe(NodeSet):
    """Reports what its nodes were called with, and the host process's BLAS setting."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    @node(inputs=("obs",), outputs=("types", "same"))
    def kinds(self, obs: Any) -> dict[str, Any]:
        self.seen.append(obs)
        return {"types": {k: type(v).__name__ for k, v in obs.items()},
                "same": obs}

    @node(inputs=("obs",), outputs=("action", "writable"), batched=True, batch_dim="obs")
    def act(self, obs: Any) -> dict[str, Any]:
        self.seen.append(obs)
        return {"action": obs["direction"] * 10,
                "writable": np.full(len(obs["direction"]), obs["image"].flags.writeable)}

    @node(inputs=("n",), outputs=("blas",))
    def process(self, n: Any) -> dict[str, Any]:
        return {"blas": os.environ.get("OPENBLAS_NUM_THREADS")}


def obs(i: int) -> dict[str, Any]:
    return {"image": np.full((7, 7, 3), i, np.uint8), "direction": i % 4,
            "mission": "go to the red ball" if i % 2 else "go to a box"}


def test_frames_small_large_several_at_once_eof_and_timeout() -> None:
    a, b = socket.socketpair()
    left, right = FrameSocket(a), FrameSocket(b)
    big = os.urandom(300_000)  # over the 64 KiB read buffer
    left.send(b"one")
    left.send(b"tw", b"o")
    sender = threading.Thread(target=left.send, args=(big,))
    sender.start()
    assert right.recv() == b"one"
    assert right.buffered()  # both small frames came in one read
    assert right.recv() == b"two"
    assert right.recv() == big
    sender.join()
    right.set_recv_timeout(0.2)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        right.recv()
    assert 0.15 < time.monotonic() - t0 < 5
    left.close()
    with pytest.raises(EOFError):
        right.recv()
    right.close()


def test_node_calls_travel_packed_and_arrive_exactly(sockets: Path) -> None:
    assert request_parts("call", "kinds", {"obs": obs(1)}, None)[0][0] == KIND_CALL
    probe, secret = Probe(), new_secret()
    with NodesetServer(probe, f"evaltui+unix://{sockets}/p.sock", secret) as host, \
            connect(host.url, secret) as proxy:
        sent = obs(3)
        out = proxy.call("kinds", {"obs": sent})
        # A non-batched node gets the values with their own types, arrays writable.
        assert out["types"] == {"image": "ndarray", "direction": "int", "mission": "str"}
        got = probe.seen[-1]
        assert np.array_equal(got["image"], sent["image"]) and got["image"].flags.writeable
        assert got["direction"] == 3 and got["mission"] == sent["mission"]
        assert np.array_equal(out["same"]["image"], sent["image"])
        assert type(out["same"]["direction"]) is int  # the packed answer keeps the type
        # A batched node gets a stacked batch (of one here), built from the raw bytes.
        answer = proxy.call("act", {"obs": obs(2)})
        assert answer["action"] == 20 and type(answer["action"]) is np.int64
        assert bool(answer["writable"]) is True
        assert probe.seen[-1]["image"].shape == (1, 7, 7, 3)
        assert probe.seen[-1]["mission"].dtype.kind == "U"


def test_what_does_not_pack_goes_pickled_both_ways(sockets: Path) -> None:
    secret = new_secret()
    with NodesetServer(BatchedStepPolicy(), f"evaltui+unix://{sockets}/p.sock",
                     secret) as host, connect(host.url, secret) as proxy:
        assert proxy.call("echo", {"x": [1, ("a", None)]}) == {"y": [1, ("a", None)]}
        assert proxy.call("echo", {"x": {1: "int key"}}) == {"y": {1: "int key"}}
        out = proxy.call("double", {"x": np.arange(3.0), "tag": ["a list"]})
        assert out["tag"] == ["a list"] and np.array_equal(out["y"], [0.0, 2.0, 4.0])
        with pytest.raises(RemoteError, match="no such thing"):
            proxy.call("fail", {"x": 1})


def test_a_frame_that_does_not_decode_fails_only_itself(sockets: Path) -> None:
    secret = new_secret()
    with NodesetServer(BatchedStepPolicy(), f"evaltui+unix://{sockets}/p.sock",
                     secret) as host, connect(host.url, secret) as proxy:
        proxy.ping()
        conn = proxy._conn
        assert conn is not None
        conn.send(b"c", b"\x00" * 3)  # a packed call cut short
        answer = decode_answer(conn.recv())
        assert answer[0] == "error"
        assert proxy.call("echo", {"x": 4}) == {"y": 4}  # the connection still serves


def test_many_callers_batch_over_the_wire(sockets: Path) -> None:
    probe, secret = Probe(), new_secret()
    with NodesetServer(probe, f"evaltui+unix://{sockets}/p.sock", secret,
                     max_wait_ms=200) as host:
        proxies = [connect(host.url, secret) for _ in range(4)]
        try:
            for p in proxies:  # each becomes a known caller
                p.call("act", {"obs": obs(0)})
            results: list[Any] = [None] * 4
            threads = [threading.Thread(target=lambda i=i: results.__setitem__(
                i, proxies[i].call("act", {"obs": obs(i)}))) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=30)
        finally:
            for p in proxies:
                p.close()
        assert [r["action"] for r in results] == [0, 10, 20, 30]
        assert host.stats()["max_batch_size_seen"] == 4


def test_a_host_process_runs_blas_single_threaded(sockets: Path) -> None:
    secret = new_secret()
    host = HostProcess(HostConfig(name="probe", impl="test_wire:Probe", secret=secret,
                                  url=f"evaltui+unix://{sockets}/p.sock"))
    host.start()
    try:
        with connect(host.url, secret) as proxy:
            assert proxy.call("process", {"n": 0})["blas"] == "1"
    finally:
        host.stop()


def test_a_host_speaking_another_wire_version_is_named(sockets: Path) -> None:
    listener = Listener(str(sockets / "old.sock"), "AF_UNIX")

    def old_host() -> None:  # the first bytes an evaltui host of wire version 1 sends
        with listener.accept() as conn:
            conn.send_bytes(b"evaltui-channel-1:" + os.urandom(32))
            conn.poll(5)

    thread = threading.Thread(target=old_host)
    thread.start()
    try:
        with pytest.raises(AuthenticationError, match="version 1, this client 2"):
            dial(f"evaltui+unix://{sockets}/old.sock", new_secret())
    finally:
        thread.join(timeout=10)
        listener.close()


PEER = """
import socket, sys, time
sock = socket.socket(fileno=int(sys.argv[1]))
for _ in range(int(sys.argv[2])):
    time.sleep(0.01)          # the client is blocked waiting for its answer by now
    assert sock.recv(64)      # reading its request frees write space on its socket...
    time.sleep(0.01)
    sock.sendall(b"\\x00\\x00\\x00\\x02ok")  # ...and only this should wake it
"""


def _voluntary_switches() -> int:
    for line in Path("/proc/thread-self/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches"):
            return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches in /proc/thread-self/status")


def test_a_waiting_client_is_woken_once_per_answer_not_when_its_request_is_read() -> None:
    # Blocked inside recv, a unix socket's reader was also woken when the peer read its
    # request (1.8 context switches per call); waiting in poll(POLLIN) it is woken once.
    ours, theirs = socket.socketpair()
    calls = 20
    peer = subprocess.Popen([sys.executable, "-c", PEER, str(theirs.fileno()), str(calls)],
                            pass_fds=(theirs.fileno(),))
    theirs.close()
    client = FrameSocket(ours)
    client.set_recv_timeout(30)
    switches = []
    try:
        for _ in range(calls):
            client.send(b"request")
            before = _voluntary_switches()
            assert client.recv() == b"ok"
            switches.append(_voluntary_switches() - before)
    finally:
        client.close()
        assert peer.wait(timeout=30) == 0
    assert sum(switches) / calls < 1.3, switches
