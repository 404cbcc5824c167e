"""Nodeset hosting: URLs, the authenticated channel, host subprocesses and client proxies."""

from __future__ import annotations

import os
import pickle
import signal
import statistics
import time
from collections.abc import Iterator
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client
from pathlib import Path

import numpy as np
import pytest
from faulty_nodesets import BatchedStepPolicy
from runhelpers import wait_until

from evaltui.engine.hosting.channel import (
    ChannelError,
    ChannelURLError,
    dial,
    host_secret,
    new_secret,
    parse_url,
)
from evaltui.engine.hosting.host import NodesetServer
from evaltui.engine.hosting.hostprocess import HostConfig, HostProcess, HostStartError
from evaltui.engine.hosting.proxy import HostGoneError, RemoteError, RemoteNodeset, connect

POLICY = "faulty_nodesets:BatchedStepPolicy"


@pytest.fixture()
def local_host(sockets: Path) -> Iterator[tuple[NodesetServer, bytes]]:
    secret = new_secret()
    with NodesetServer(BatchedStepPolicy(), f"evaltui+unix://{sockets}/p.sock", secret) as host:
        yield host, secret


@pytest.fixture()
def host_process(sockets: Path, tmp_path: Path) -> Iterator[tuple[HostProcess, bytes]]:
    secret = new_secret()
    host = HostProcess(HostConfig(name="policy", impl=POLICY, secret=secret,
                                  url=f"evaltui+unix://{sockets}/p.sock",
                                  params={"trace_dir": str(tmp_path)}))
    host.start()
    try:
        yield host, secret
    finally:
        host.stop(grace_sec=1.0)


def test_urls() -> None:
    assert parse_url("evaltui+unix:///tmp/x/p.sock").address == "/tmp/x/p.sock"
    tcp = parse_url("evaltui+tcp://127.0.0.1:4567")
    assert (tcp.family, tcp.address, tcp.url) == ("AF_INET", ("127.0.0.1", 4567),
                                                  "evaltui+tcp://127.0.0.1:4567")
    for bad in ("http://x", "evaltui+unix://relative.sock", "evaltui+tcp://127.0.0.1",
                "evaltui+tcp://:80"):
        with pytest.raises(ChannelURLError):
            parse_url(bad)


def test_calls_errors_and_introspection(local_host: tuple[NodesetServer, bytes]) -> None:
    host, secret = local_host
    with connect(host.url, secret) as proxy:
        assert proxy.call("echo", {"x": [1, "a"]}) == {"y": [1, "a"]}
        out = proxy.call("double", {"x": np.arange(3.0), "tag": "t"})
        assert np.array_equal(out["y"], [0.0, 2.0, 4.0]) and out["tag"] == "t"
        with pytest.raises(RemoteError, match="KeyError") as info:
            proxy.call("fail", {"x": 7})
        assert "no such thing: 7" in str(info.value) and "Traceback" in str(info.value)
        with pytest.raises(RemoteError, match="no node op 'nope'"):
            proxy.call("nope", {})
        assert proxy.call("echo", {"x": 1}) == {"y": 1}  # still usable after errors
        info_ = proxy.describe()
        assert info_["impl"] == POLICY and info_["pid"] == os.getpid()
        act = info_["node_specs"]["act"]
        assert act["batched"] and act["batch_dim"] == "obs"
        stats = proxy.stats()
        assert stats["clients"] == 1 and stats["errors"] == 2


def test_tcp_port_zero_is_resolved() -> None:
    secret = new_secret()
    with NodesetServer(BatchedStepPolicy(), "evaltui+tcp://127.0.0.1:0", secret) as host:
        assert parse_url(host.url).address[1] > 0  # type: ignore[index]
        with connect(host.url, secret) as proxy:
            assert proxy.call("echo", {"x": 5}) == {"y": 5}


def test_wrong_secret_is_refused(local_host: tuple[NodesetServer, bytes]) -> None:
    host, secret = local_host
    with pytest.raises(AuthenticationError, match="refused the secret"):
        dial(host.url, b"not the secret")
    with connect(host.url, secret) as proxy:  # the host keeps serving the right peers
        assert proxy.call("echo", {"x": 1}) == {"y": 1}


class _Exploit:
    """Unpickling this runs code: it touches a file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.path,))


def test_nothing_is_unpickled_before_the_handshake(local_host: tuple[NodesetServer, bytes],
                                                   tmp_path: Path) -> None:
    host, secret = local_host
    marker = tmp_path / "pwned"
    addr = parse_url(host.url)
    conn = Client(addr.address, addr.family)
    try:
        conn.recv_bytes(256)  # the host's challenge
        conn.send_bytes(pickle.dumps(_Exploit(marker)))  # in place of the answer
        answer = conn.recv_bytes(256)
        assert answer == b"denied"
        with pytest.raises((EOFError, OSError)):  # the host has closed the connection
            conn.send(_Exploit(marker))
            conn.recv_bytes()
    finally:
        conn.close()
    time.sleep(0.2)
    assert not marker.exists()
    # A client that stays silent does not stall the others.
    silent = Client(addr.address, addr.family)
    try:
        with connect(host.url, secret) as proxy:
            assert proxy.call("echo", {"x": 2}) == {"y": 2}
    finally:
        silent.close()


def test_host_secret_file(tmp_path: Path) -> None:
    with pytest.raises(ChannelError, match="no host secret"):
        host_secret(tmp_path)
    key = host_secret(tmp_path, create=True)
    assert len(key) == 32 and host_secret(tmp_path, create=True) == key
    path = tmp_path / "hosting.key"
    assert path.stat().st_mode & 0o777 == 0o600
    path.chmod(0o644)
    with pytest.raises(ChannelError, match="readable by other users"):
        host_secret(tmp_path)


def test_host_process_restarts_at_the_same_url(host_process: tuple[HostProcess, bytes],
                                               tmp_path: Path) -> None:
    host, secret = host_process
    proxy = connect(host.url, secret, connect_timeout=0.5)
    try:
        first_pid = proxy.describe()["pid"]
        assert first_pid == host.pid != os.getpid()
        assert (tmp_path / f"host.{first_pid}").exists()
        os.kill(first_pid, signal.SIGKILL)
        wait_until(host.died, timeout=10, what="the host's death to show")
        with pytest.raises((HostGoneError, ChannelError)):
            proxy.call("echo", {"x": 1})  # nothing listens there any more
        url = host.url
        host.restart()
        assert host.url == url and host.pid != first_pid and host.restarts == 1
        assert proxy.call("echo", {"x": 3}) == {"y": 3}  # reconnects by itself
    finally:
        proxy.close()


def test_a_request_in_flight_when_the_host_dies_fails_cleanly(
        host_process: tuple[HostProcess, bytes]) -> None:
    host, secret = host_process
    with RemoteNodeset(host.url, secret, connect_timeout=0.5) as proxy:
        assert proxy.call("echo", {"x": 1}) == {"y": 1}
        os.kill(host.pid, signal.SIGKILL)  # type: ignore[arg-type]
        wait_until(host.died, timeout=10, what="the host's death to show")
        with pytest.raises((HostGoneError, ChannelError)):
            proxy.call("echo", {"x": 1})


def test_host_that_cannot_build_its_nodeset_says_why(sockets: Path) -> None:
    host = HostProcess(HostConfig(name="bad", impl=POLICY, secret=new_secret(),
                                  url=f"evaltui+unix://{sockets}/b.sock",
                                  params={"no_such_param": 1}))
    try:
        with pytest.raises(HostStartError, match="no_such_param"):
            host.start()
    finally:
        host.stop()


def test_round_trip_latency_is_reported(host_process: tuple[HostProcess, bytes]) -> None:
    host, secret = host_process
    with connect(host.url, secret) as proxy:
        for _ in range(50):
            proxy.ping()
        samples = []
        for _ in range(300):
            t0 = time.perf_counter()
            proxy.call("echo", {"x": 1})
            samples.append(time.perf_counter() - t0)
    # No timed assertion in the default suite; the benchmark reports the numbers.
    assert statistics.median(samples) > 0
