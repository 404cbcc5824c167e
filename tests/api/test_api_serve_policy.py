"""``evaltui serve-policy`` is a queue entry of its own (kind ``serve``): admitted by a
backend on the GPU budget before it loads its model, it holds its reservation while it
serves, reports its URL and requests served (the API, ``ls``, the TUI's rows), waits
in the queue like a run while the GPU is taken, and ``evaltui cancel admit:ID`` or
SIGTERM stop it cleanly and give the reservation back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
from apihelpers import wait_until
from ports import free_ports

from evaltui.api.client import ApiClient
from evaltui.contract.states import RunState
from evaltui.engine.hosting.policysource import resolve_source
from evaltui.nodesets.openpi import WebsocketPolicy
from evaltui.scheduler.admission.calibration import Calibration, NodesetPart, nodeset_key
from evaltui.tui.attached import AttachedBackend


def healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def serve(popen: Callable[..., subprocess.Popen[Any]], port: int, *args: str
          ) -> subprocess.Popen[str]:
    return popen([sys.executable, "-m", "evaltui.cli", "serve-policy", "model:policy",
                  "--port", str(port), *args],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def act_once(port: int) -> None:
    policy = WebsocketPolicy(url=f"ws://127.0.0.1:{port}")
    try:
        obs = {"image": np.zeros((7, 7, 3), np.uint8), "direction": 0,
               "mission": "go to the red ball"}
        assert 0 <= int(policy.act(obs)["action"]) < 7
    finally:
        policy.close()


def test_serve_policy_is_admitted_listed_with_its_url_and_stopped_by_cancel(
        popen: Callable[..., subprocess.Popen[Any]], monkeypatch) -> None:
    backend_port, policy_port = free_ports(2)
    monkeypatch.setenv("EVALTUI_PORT_POOL", str(backend_port))
    server = serve(popen, policy_port, "--vram-mb", "3000")
    wait_until(lambda: healthy(policy_port) or server.poll() is not None, 90, "served")
    assert server.poll() is None, server.communicate()
    url = f"http://127.0.0.1:{backend_port}"
    with ApiClient(url) as client:
        [admit] = client.list_admits()
        assert (admit.kind, admit.state.value, admit.gpu) == ("serve", "admitted", 0)
        assert admit.reserved_mb == 3000 and "serve-policy model:policy" in admit.command
        [held] = client.resources().ledger
        assert (held.run_id, held.gpu, held.vram_mb) == (f"admit:{admit.admit_id}", 0, 3000)
        act_once(policy_port)
        wait_until(lambda: client.get_admit(admit.admit_id).requests_served == 1, 30,
                   "the request served to be reported")
        assert client.get_admit(admit.admit_id).url == f"ws://127.0.0.1:{policy_port}"
        listed = cli("ls", "--url", url)
        line = next(ln for ln in listed.stdout.splitlines() if admit.admit_id in ln)
        assert "running" in line and "serve serve-policy" in line, listed.stdout
        assert f"ws://127.0.0.1:{policy_port}" in line
        assert "holds GPU0, 3000 MiB; 1 requests served" in line, line
        # The TUI's rows (an attached TUI; the embedded one reads the same queue).
        tui = AttachedBackend(url, owner="tester")
        try:
            tui.start()
            [row] = [r for r in tui.snapshot().runs if r.run_id == f"admit:{admit.admit_id}"]
        finally:
            tui.stop()
        assert (row.kind, row.state, row.url, row.requests_served) == \
            ("serve", RunState.RUNNING, f"ws://127.0.0.1:{policy_port}", 1)
        cancelled = cli("cancel", f"admit:{admit.admit_id}", "--url", url)
        assert cancelled.returncode == 0, cancelled.stderr
        out, err = server.communicate(timeout=60)
        assert server.returncode == 0, err  # stopped cleanly, as on SIGTERM
        assert "was released from outside (evaltui cancel); stopping" in err
        assert "stopped: served 1 requests" in out
        assert [a.state.value for a in client.list_admits()] == ["released"]
        assert client.resources().ledger == []
    assert not healthy(policy_port)


def test_a_second_server_waits_in_the_queue_and_sigterm_leaves_it(
        popen: Callable[..., subprocess.Popen[Any]], monkeypatch) -> None:
    """The first takes the (only, fake) GPU whole; the second waits in the queue as a
    serve entry, its model not loaded; SIGTERM takes it out, then stops the first."""
    backend_port, first_port, second_port = free_ports(3)
    monkeypatch.setenv("EVALTUI_PORT_POOL", str(backend_port))
    first = serve(popen, first_port)  # no profile: a whole GPU, exclusive
    wait_until(lambda: healthy(first_port) or first.poll() is not None, 90, "served")
    second = serve(popen, second_port)
    with ApiClient(f"http://127.0.0.1:{backend_port}") as client:
        def waiting() -> list[Any]:
            return [q for q in client.queue() if q.admit_kind == "serve"]
        wait_until(lambda: waiting() and waiting()[0].waiting_reason, 60, "the second to wait")
        [queued] = waiting()
        assert queued.kind == "admit" and queued.label == "serve-policy"
        assert not healthy(second_port)
        second.send_signal(signal.SIGTERM)
        _, err = second.communicate(timeout=60)
        assert second.returncode == 128 + signal.SIGTERM, err
        assert "left the queue" in err
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=60)
        assert first.returncode == 0, err
        assert {a.state.value for a in client.list_admits()} == {"released"}
        assert client.resources().ledger == []


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaltui.cli", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "COLUMNS": "200"})


def test_without_a_declared_need_it_reserves_what_runs_of_its_nodeset_measured(
        popen: Callable[..., subprocess.Popen[Any]], monkeypatch) -> None:
    """No profile, no --vram-mb: the calibrated peaks of the served nodeset (impl and
    params, as runs of it recorded them) are its GPU memory and host RAM; once it
    served, its own peak RSS is recorded as that nodeset's RAM. An attached TUI's cancel
    stops it."""
    backend_port, policy_port = free_ports(2)
    monkeypatch.setenv("EVALTUI_PORT_POOL", str(backend_port))
    source = resolve_source("model:policy")
    key = nodeset_key(source.impl, source.params)
    part = NodesetPart("policy", key, source.impl, source.params, "shared", 1)
    calibration = Calibration()
    calibration.record_nodeset("vram", part, 1234)
    calibration.record_nodeset("ram", part, 321)
    server = serve(popen, policy_port)
    wait_until(lambda: healthy(policy_port) or server.poll() is not None, 90, "served")
    with ApiClient(f"http://127.0.0.1:{backend_port}") as client:
        [admit] = client.list_admits()
        assert (admit.reserved_mb, admit.ram_mb, admit.exclusive) == (1234, 321, False)
        [held] = client.resources().ledger
        assert (held.vram_mb, held.ram_mb) == (1234, 321)
        # Stopped from an attached TUI's queue (its `c`): the entry released, it stops.
        tui = AttachedBackend(f"http://127.0.0.1:{backend_port}", owner="tester")
        try:
            tui.start()
            assert tui.cancel(f"admit:{admit.admit_id}") is RunState.CANCELLED
        finally:
            tui.stop()
        _, err = server.communicate(timeout=60)
        assert server.returncode == 0, err
        assert "released from outside" in err
        assert "1234 MiB of GPU memory calibrated" in err and "321 MiB of host RAM" in err
    samples = Calibration().entries()[key]["ram"]
    assert len(samples) == 2 and samples[-1] > 50  # its own peak RSS (python + numpy)
