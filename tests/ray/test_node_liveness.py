"""The node-loss rule's check itself (engine/executor/ray/liveness.py), against real gRPC
servers on loopback: a raylet that answers anything is alive (an auth layer refusing the
check is still an answer: a token-auth cluster must not read as all nodes lost), one that
refuses connections or lets the deadline pass is not."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

grpc = pytest.importorskip("grpc", reason="grpcio comes with ray")

from evaltui.engine.executor.ray import liveness  # noqa: E402
from evaltui.engine.executor.ray.liveness import NodeLiveness, _Node  # noqa: E402


@contextmanager
def health_server(how: str) -> Iterator[str]:
    """A gRPC server on 127.0.0.1 whose health check answers ``serving``, refuses the
    caller (``unauthenticated``) or never answers (``hang``)."""
    release = threading.Event()

    def check(request: bytes, context: Any) -> bytes:
        if how == "unauthenticated":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "no token")
        if how == "hang":
            release.wait(10)
        return b"\x08\x01"

    handler = grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": grpc.unary_unary_rpc_method_handler(
            check, request_deserializer=lambda b: b, response_serializer=lambda b: b)})
    from concurrent.futures import ThreadPoolExecutor

    server = grpc.server(ThreadPoolExecutor(max_workers=2), handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        release.set()
        server.stop(grace=None)


def watched(address: str) -> NodeLiveness:
    rule = NodeLiveness()
    rule._nodes["n1"] = _Node(address, grpc.insecure_channel(address), time.monotonic())
    return rule


@pytest.mark.parametrize("how", ["serving", "unauthenticated"])
def test_a_raylet_that_answers_is_alive(how: str) -> None:
    with health_server(how) as address:
        rule = watched(address)
        try:
            assert rule.check_now("n1") and rule.lost() == set()
        finally:
            rule.close()


def test_a_refusing_or_silent_raylet_is_lost_at_once_after_a_death() -> None:
    with socket.socket() as free:  # a port nothing listens on: connection refused
        free.bind(("127.0.0.1", 0))
        refused = f"127.0.0.1:{free.getsockname()[1]}"
    rule = watched(refused)
    try:
        assert not rule.check_now("n1") and rule.lost() == {"n1"}
        assert "connection refused" in rule.why("n1")
    finally:
        rule.close()
    with health_server("hang") as address:
        rule = watched(address)
        try:
            t0 = time.monotonic()
            assert not rule.check_now("n1")
            assert time.monotonic() - t0 < liveness.CHECK_DEADLINE_SEC + 0.5
            assert rule.lost() == {"n1"} and "deadline_exceeded" in rule.why("n1")
        finally:
            rule.close()


def test_the_rule_waits_out_lost_after_sec_before_calling_a_silent_node_lost() -> None:
    """Without a death to confirm, one failed check is not enough: the node is lost only
    once nothing has answered for LOST_AFTER_SEC (the thread's own checks)."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        refused = f"127.0.0.1:{free.getsockname()[1]}"
    rule = watched(refused)
    rule._nodes_read = float("inf")  # no Ray here: keep the node list as given
    rule._thread = threading.Thread(target=rule._loop, daemon=True)
    t0 = time.monotonic()
    rule._thread.start()
    try:
        deadline = t0 + liveness.LOST_AFTER_SEC + 2 * liveness.CHECK_EVERY_SEC + 1.0
        while not rule.lost() and time.monotonic() < deadline:
            time.sleep(0.05)
        took = time.monotonic() - t0
        assert rule.lost() == {"n1"}, took
        assert liveness.LOST_AFTER_SEC <= took, took
    finally:
        rule.close()
