"""``evaltui run PROFILE -- evaltui serve-policy ...``: a policy server admitted on the GPU
budget holds its reservation while it serves and gives it back when stopped (the way
docs/policy-servers.md says to queue one)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest
from apihelpers import wait_until

from evaltui.api.client import ApiClient
from evaltui.nodesets.openpi import WebsocketPolicy


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_served_under_evaltui_run_it_holds_a_gpu_until_stopped(
        popen: Callable[..., subprocess.Popen[Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    backend_port, policy_port = free_ports(2)
    monkeypatch.setenv("EVALTUI_PORT_POOL", str(backend_port))
    wrapper = popen([sys.executable, "-m", "evaltui.cli", "run", "whole", "--",
                     sys.executable, "-m", "evaltui.cli", "serve-policy", "model:policy",
                     "--port", str(policy_port)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: healthy(policy_port) or wrapper.poll() is not None, 90, "served")
    assert wrapper.poll() is None, wrapper.communicate()
    with ApiClient(f"http://127.0.0.1:{backend_port}") as client:
        [admit] = client.list_admits()
        assert admit.state.value in ("admitted", "running"), admit
        [held] = client.resources().ledger
        assert held.gpu == 0
        policy = WebsocketPolicy(url=f"ws://127.0.0.1:{policy_port}")
        try:
            obs = {"image": np.zeros((7, 7, 3), np.uint8), "direction": 0,
                   "mission": "go to the red ball"}
            assert 0 <= int(policy.act(obs)["action"]) < 7
        finally:
            policy.close()
        wrapper.send_signal(signal.SIGTERM)
        out, err = wrapper.communicate(timeout=60)
        assert wrapper.returncode == 0, err
        assert "serving model:policy" in out
        assert [a.state.value for a in client.list_admits()] == ["released"]
        assert client.resources().ledger == []
    assert not healthy(policy_port)
