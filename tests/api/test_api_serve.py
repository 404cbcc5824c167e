"""``evaltui serve`` as a process: loopback by default, clean stop on SIGTERM with runs left
running, and the next backend adopting them."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from apihelpers import bot_spec, wait_until

from evaltui.api.client import ApiClient
from evaltui.api.server import is_loopback
from evaltui.cli import main
from evaltui.contract.pidref import PidRef

Popen = Callable[..., subprocess.Popen[Any]]


def _serve(popen: Popen, *extra: str) -> tuple[subprocess.Popen[Any], str]:
    proc = popen([sys.executable, "-m", "evaltui.cli", "serve", "--port", "0", *extra],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    match = re.search(r"listening on (http://\S+)", line)
    assert match, (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, match.group(1)


def test_sigterm_stops_the_api_but_not_the_runs(popen: Popen) -> None:
    proc, url = _serve(popen)
    client = ApiClient(url)
    run_id = client.submit(bot_spec(300, latency_ms=20)).run_id
    wait_until(lambda: client.get_run(run_id).state.value == "running", what="the run to run")
    record = client.get_run(run_id).scheduler
    assert record is not None and record.pid is not None and record.pid_create_time is not None
    run = PidRef(record.pid, record.pid_create_time)
    streaming = threading.Event()

    def listen() -> None:
        with ApiClient(url) as listener:
            try:
                for _ in listener.events():
                    streaming.set()
            except Exception:
                pass  # the stream ends with the server

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    client.submit(bot_spec(1))  # an event, so the stream is known to be open
    assert streaming.wait(10)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    assert time.monotonic() - started < 8  # the open event stream did not hold it up
    assert "runs keep running" in proc.stderr.read()
    assert run.alive()
    client.close()
    listener.join(10)

    # The next backend adopts the running run, and can cancel it.
    proc2, url2 = _serve(popen)
    with ApiClient(url2) as client2:
        assert client2.get_run(run_id).state.value == "running"
        client2.cancel(run_id)
        wait_until(lambda: client2.get_run(run_id).state.value == "cancelled", timeout=20,
                   what="the adopted run to be cancelled")
    proc2.send_signal(signal.SIGINT)
    assert proc2.wait(15) == 0


def test_non_loopback_host_needs_a_token_file(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "--token-file" in capsys.readouterr().err
    short = tmp_path / "short-token"
    short.write_text("abc")
    assert main(["serve", "--port", "0", "--token-file", str(short)]) == 2
    assert "no usable token" in capsys.readouterr().err


def test_a_full_state_dir_is_one_line_and_leaves_no_partial_token(
        capsys: pytest.CaptureFixture[str], small_disk, monkeypatch: pytest.MonkeyPatch) -> None:
    disk = small_disk("state", "256k")  # a tmpfs: root only, skipped elsewhere
    monkeypatch.setenv("EVALTUI_STATE_DIR", str(disk.path))
    disk.fill()
    assert main(["serve", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot create the token file" in err, err
    assert "No space left on device" in err
    assert disk.leftovers() == []  # no empty .token.* left behind
    assert not (disk.path / "token").exists()


def test_port_in_use_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 1
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("::", False), ("10.0.0.1", False),
    ("example.org", False),
])
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_start_backend_serves_and_a_failed_start_leaves_nothing_running() -> None:
    """The one wiring of serve and the TUI: a busy port raises OSError with no admit-queue
    or server thread left behind; a started backend answers and stops its threads."""
    import httpx

    from evaltui.api.backend_start import start_backend
    from evaltui.scheduler.scheduler import JobScheduler

    scheduler = JobScheduler()
    before = set(threading.enumerate())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            start_backend(scheduler, port=taken.getsockname()[1])
    assert set(threading.enumerate()) == before
    with start_backend(scheduler, port=0) as served:
        assert httpx.get(f"{served.url}/healthz", timeout=5).status_code == 200
        assert httpx.get(f"{served.url}/api/eval/v2/queue", timeout=5).status_code == 401
    wait_until(lambda: set(threading.enumerate()) == before, timeout=10,
               what="the server and admit-queue threads to end")
