"""Helpers of the policy-server tests: the reference openpi server (``refserver.py``) and
``evaltui serve-policy`` in subprocesses on loopback ports, ended by pid whatever the test
does; the second environment with the real ``openpi-client``; BabyAI run specs."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
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
from runhelpers import builtin_graph, comparable, running  # noqa: E402
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


@contextmanager
def serve_policy(*args: str) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """``evaltui serve-policy ARGS --port 0``, listening; its port. Ended by SIGTERM (then
    SIGKILL), by pid, at the end."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen([sys.executable, "-m", "evaltui.cli", "serve-policy", *args,
                             "--no-queue", "--port", "0"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True)
    reader.start()
    try:
        wait_until(lambda: lines, 60, "serve-policy's first line")
        match = re.search(r"ws://127\.0\.0\.1:(\d+) ", lines[0])
        assert match, (lines, proc.stderr.read() if proc.poll() is not None else "")
        yield int(match.group(1)), proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=20)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()


def stats(port: int) -> dict[str, Any]:
    return httpx.get(f"http://127.0.0.1:{port}/stats", timeout=5).json()


OPENPI_VENV = Path(tempfile.gettempdir()) / (
    f"evaltui-openpi-client-py{sys.version_info.major}{sys.version_info.minor}")


def build_openpi_python() -> Path:
    """A second environment with the real ``openpi-client`` from PyPI (it needs numpy<2,
    so it cannot live beside evaltui), built once and kept in the temp dir: what a user
    who evaluates against openpi does. ``typing_extensions`` is installed with it: the
    package imports it without declaring it."""
    python = OPENPI_VENV / "bin" / "python"
    if python.is_file():
        return python
    building = OPENPI_VENV.with_name(f"{OPENPI_VENV.name}.{os.getpid()}.tmp")
    shutil.rmtree(building, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(building)], check=True, timeout=300)
    pip = subprocess.run([str(building / "bin" / "pip"), "install", "-q", "openpi-client",
                          "typing_extensions"], capture_output=True, text=True, timeout=600)
    if pip.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        if "No matching distribution" in pip.stderr or "connection" in pip.stderr.lower():
            pytest.skip(f"cannot install openpi-client from PyPI: {pip.stderr.strip()[-200:]}")
        raise AssertionError(pip.stderr)
    try:
        building.rename(OPENPI_VENV)
    except OSError:  # another session built it meanwhile: use theirs
        shutil.rmtree(building, ignore_errors=True)
    return python


EPISODES = 8


def spec(graph: str, workers: int, episodes: int = EPISODES, retries: int = 0,
         step_timeout: float | None = None, **policy: Any) -> dict[str, Any]:
    g = builtin_graph(graph, env__frame_stride=0)
    g["nodesets"]["policy"]["params"].update(policy)
    ev: dict[str, Any] = {"dataset": "babyai", "split": "GoToLocal", "episode_count": episodes,
                          "worker_count": workers, "max_episode_retries": retries}
    if step_timeout is not None:
        ev["per_step_budget_sec"] = step_timeout
    return {"graph": g, "eval": ev}


def run(spec_data: dict[str, Any], outputs: Path) -> Path:
    with running(spec_data, outputs) as (run_dir, proc):
        proc.wait(timeout=180)
        return run_dir


GRAPH_FIELDS = {"graph_name", "nodes", "worker_count"}  # the graphs differ by design


def same(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A row's outcome: what the episode did and scored, not which graph ran it."""
    return [{k: v for k, v in comparable(r).items() if k not in GRAPH_FIELDS} for r in rows]
