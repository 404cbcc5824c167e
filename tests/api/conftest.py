"""API test fixtures: a real scheduler behind a real uvicorn on an ephemeral loopback port,
with isolated state dir and outputs; every server, run and process they start is stopped
or killed at teardown, even when a test fails."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from apihelpers import Backend, isolate_env, kill_backends, start_backend  # noqa: E402
from proctools import kill_runs, session_starter  # noqa: E402


@pytest.fixture(autouse=True)
def api_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Per-test state dir and outputs root; one fake 24 GiB GPU; no leaking variables."""
    return isolate_env(tmp_path, monkeypatch)


@pytest.fixture
def make_backend(api_env: dict[str, Path]) -> Iterator[Callable[..., Backend]]:
    made: list[Backend] = []

    def make(lock_check: Callable[[], str | None] | None = None, **app_kwargs: Any) -> Backend:
        backend = start_backend(lock_check, **app_kwargs)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.stop()
    kill_runs(api_env["outputs"])


@pytest.fixture
def backend(make_backend: Callable[..., Backend]) -> Backend:
    return make_backend()


@pytest.fixture
def popen(api_env: dict[str, Path]) -> Iterator[Callable[..., subprocess.Popen[Any]]]:
    """Start processes in their own group; groups, runs and `evaltui run` backends are
    killed at teardown."""
    with session_starter() as start:
        yield start
    kill_backends(api_env["state"])
    kill_runs(api_env["outputs"])
