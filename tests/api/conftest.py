"""API test fixtures: a real scheduler behind a real uvicorn on an ephemeral loopback port,
with isolated state dir and outputs; every server, run and process they start is stopped
or killed at teardown, even when a test fails."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from apihelpers import kill_backends, kill_group, kill_runs  # noqa: E402

from evaltui.api.app import make_api  # noqa: E402
from evaltui.api.auth import load_or_create_token  # noqa: E402
from evaltui.api.client import ApiClient  # noqa: E402
from evaltui.api.models import API_PREFIX  # noqa: E402
from evaltui.api.server import ApiServer  # noqa: E402
from evaltui.scheduler import JobScheduler  # noqa: E402
from evaltui.scheduler.admits import AdmitQueue  # noqa: E402


@pytest.fixture(autouse=True)
def api_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Per-test state dir and outputs root; one fake 24 GiB GPU; no leaking variables."""
    state, outputs = tmp_path / "state", tmp_path / "outputs"
    state.mkdir()
    outputs.mkdir()
    monkeypatch.setenv("EVALTUI_STATE_DIR", str(state))
    monkeypatch.setenv("EVALTUI_OUTPUTS", str(outputs))
    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "1x24576")
    for var in ("EVALTUI_FAKE_GPU_INDEX", "EVALTUI_LEDGER_AUDIT", "CUDA_VISIBLE_DEVICES",
                "BACKEND_URL", "EVALTUI_TOKEN", "EVALTUI_PORT_POOL"):
        monkeypatch.delenv(var, raising=False)
    return {"state": state, "outputs": outputs}


@dataclass
class Backend:
    """A served scheduler: its URL, token, and raw/typed clients."""

    scheduler: JobScheduler
    admits: AdmitQueue
    server: ApiServer
    token: str
    clients: list[Any] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    def http(self, token: str | None = "default") -> httpx.Client:
        """A raw client under the API prefix (``token=None``: no Authorization header)."""
        token = self.token if token == "default" else token
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        client = httpx.Client(base_url=self.url + API_PREFIX, headers=headers, timeout=30)
        self.clients.append(client)
        return client

    def client(self) -> ApiClient:
        client = ApiClient(self.url, self.token)
        self.clients.append(client)
        return client


@pytest.fixture
def make_backend(api_env: dict[str, Path]) -> Iterator[Callable[..., Backend]]:
    made: list[Backend] = []

    def make(lock_check: Callable[[], str | None] | None = None, **app_kwargs: Any) -> Backend:
        scheduler = JobScheduler(tick_interval=0.1, probe_interval=0.1, cancel_grace_sec=2.0,
                                 lock_check=lock_check)
        admits = AdmitQueue(scheduler.outputs, tick_interval=0.1)
        token = load_or_create_token()
        app_kwargs.setdefault("heartbeat_sec", 0.5)
        server = ApiServer(make_api(scheduler, token, admits=admits, **app_kwargs), port=0)
        backend = Backend(scheduler, admits, server, token)
        made.append(backend)
        scheduler.start()
        admits.start()
        server.start()
        return backend

    yield make
    for backend in made:
        for client in backend.clients:
            client.close()
        backend.server.stop()
        backend.admits.stop()
        backend.scheduler.stop()
    kill_runs(api_env["outputs"])


@pytest.fixture
def backend(make_backend: Callable[..., Backend]) -> Backend:
    return make_backend()


@pytest.fixture
def popen(api_env: dict[str, Path]) -> Iterator[Callable[..., subprocess.Popen[Any]]]:
    """Start processes in their own group; groups, runs and `evaltui run` backends are
    killed at teardown."""
    procs: list[subprocess.Popen[Any]] = []

    def start(args: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
        kwargs.setdefault("start_new_session", True)
        kwargs.setdefault("env", dict(os.environ))
        proc = subprocess.Popen(args, **kwargs)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        kill_group(proc.pid)
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    kill_backends(api_env["state"])
    kill_runs(api_env["outputs"])
