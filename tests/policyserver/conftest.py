"""Fixtures of the policy-server tests: the reference openpi server (``refserver.py``) in a
subprocess on a loopback port, ended by its pid whatever the test does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
for extra in (str(TESTS), str(TESTS / "engine")):
    if extra not in sys.path:
        sys.path.insert(0, extra)

from ports import free_port  # noqa: E402
from waiting import wait_until  # noqa: E402


def healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def reference_server(mode: str = "ok", *, key: str | None = None, port: int | None = None,
                     log: Path | None = None) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """The reference server, ready; killed (SIGKILL, by pid) at the end if still up."""
    port = port or free_port()
    env = dict(os.environ, **({"REFSERVER_LOG": str(log)} if log else {}))
    argv = [sys.executable, str(HERE / "refserver.py"), str(port), mode, *([key] if key else [])]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_until(lambda: healthy(port) or proc.poll() is not None, 30, "reference server")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        yield port, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()


@pytest.fixture
def refserver() -> Callable[..., Any]:
    return reference_server
