"""``evaltui run PROFILE -- evaltui serve-policy ...``: a policy server admitted on the GPU
budget holds its reservation while it serves, is listed by ``ls`` and stopped by
``evaltui cancel admit:ID``, and gives the reservation back (the way
docs/policy-servers.md says to queue one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest
from apihelpers import wait_until
from ports import free_ports

from evaltui.api.client import ApiClient
from evaltui.nodesets.openpi import WebsocketPolicy


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
        url = f"http://127.0.0.1:{backend_port}"
        listed = cli("ls", "--url", url)
        assert f"admit:{admit.admit_id}" in listed.stdout and "running" in listed.stdout
        assert "holds GPU0" in listed.stdout, listed.stdout
        cancelled = cli("cancel", f"admit:{admit.admit_id}", "--url", url)
        assert cancelled.returncode == 0, cancelled.stderr
        assert f"run admit:{admit.admit_id}: cancelled" in cancelled.stdout
        out, err = wrapper.communicate(timeout=60)
        assert wrapper.returncode == 0, err  # serve-policy stops cleanly on the SIGTERM
        assert "released from outside (evaltui cancel); stopping the command" in err
        assert "serving model:policy" in out and "stopped: served 1 requests" in out
        assert [a.state.value for a in client.list_admits()] == ["released"]
        assert client.resources().ledger == []
    assert not healthy(policy_port)


def test_sigterm_to_the_wrapper_stops_the_server_and_releases(
        popen: Callable[..., subprocess.Popen[Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    backend_port, policy_port = free_ports(2)
    monkeypatch.setenv("EVALTUI_PORT_POOL", str(backend_port))
    wrapper = popen([sys.executable, "-m", "evaltui.cli", "run", "whole", "--",
                     sys.executable, "-m", "evaltui.cli", "serve-policy", "model:policy",
                     "--port", str(policy_port)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: healthy(policy_port) or wrapper.poll() is not None, 90, "served")
    wrapper.send_signal(signal.SIGTERM)
    _, err = wrapper.communicate(timeout=60)
    assert wrapper.returncode == 0, err
    with ApiClient(f"http://127.0.0.1:{backend_port}") as client:
        assert [a.state.value for a in client.list_admits()] == ["released"]
        assert client.resources().ledger == []


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaltui.cli", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "COLUMNS": "200"})
