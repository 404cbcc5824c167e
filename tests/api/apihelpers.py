"""Served backends, specs, waiting and process cleanup for the API tests (and for the
attached TUI's tests, which import this module rather than copy it)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from proctools import kill_group

from evaltui.api import backend_start
from evaltui.api.client import ApiClient
from evaltui.api.models import API_PREFIX
from evaltui.api.server import ApiServer
from evaltui.contract.pidref import PidRef
from evaltui.graphs import builtin_graph_path
from evaltui.rundir.jsonfiles import read_json
from evaltui.scheduler.admits.queue import AdmitQueue
from evaltui.scheduler.scheduler import JobScheduler

# tests/ holds the suite-wide helpers; driver scripts run from their own folder need it too.
_TESTS_DIR = str(Path(__file__).resolve().parents[1])
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
from waiting import wait_until as _wait_until  # noqa: E402


def isolate_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
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

    def stop(self) -> None:
        """Close its clients, stop the server, the admit queue and the scheduler."""
        for client in self.clients:
            client.close()
        self.server.stop()
        self.scheduler.stop()


def start_backend(lock_check: Callable[[], str | None] | None = None, port: int = 0,
                  **app_kwargs: Any) -> Backend:
    """A ticking scheduler, its admit queue and the API on 127.0.0.1:``port`` (0: any),
    in the state dir and outputs of the environment, wired by the product's own
    ``start_backend``. The caller must ``stop()`` it."""
    scheduler = JobScheduler(tick_interval=0.1, probe_interval=0.1, cancel_grace_sec=2.0,
                             lock_check=lock_check)
    app_kwargs.setdefault("heartbeat_sec", 0.5)
    scheduler.start()
    try:
        served = backend_start.start_backend(scheduler, port=port, **app_kwargs)
    except BaseException:
        scheduler.stop()
        raise
    return Backend(scheduler, served.admits, served.server, served.token)


def bot_spec(episodes: int = 2, *, latency_ms: int = 0, priority: int = 0,
             vram_mb: int = 0, exclusive: bool = False) -> dict[str, Any]:
    """The built-in expert bot on the first BabyAI GoToLocal episodes (~1 s a run)."""
    graph = json.loads(builtin_graph_path("bot").read_text())  # type: ignore[union-attr]
    ev: dict[str, Any] = {"episode_count": episodes}
    if latency_ms:
        ev["selectors"] = {"env.sim_latency_ms": latency_ms}
    return {"graph": graph, "eval": ev,
            "scheduling": {"priority": priority, "marginal_vram_mb": vram_mb,
                           "exclusive_gpu": exclusive}}



def wait_until(cond: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """:func:`tests.waiting.wait_until` with this folder's default deadline."""
    return _wait_until(cond, timeout, what)


def kill_backends(state: Path) -> None:
    """SIGKILL the backends `evaltui run` started under a state dir (by their pid files)."""
    for path in (state / "backends").glob("*.pid"):
        try:
            data = read_json(path)
            ref = PidRef(int(data["pid"]), float(data["create_time"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if ref.alive():
            kill_group(ref.pid)
        try:
            os.waitpid(ref.pid, os.WNOHANG)
        except ChildProcessError:
            pass
