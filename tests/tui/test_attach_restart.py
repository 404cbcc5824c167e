"""``evaltui --attach`` across a backend restart: two real ``evaltui serve`` processes, one
after the other on the same port. The header must name the live backend's pid, and
what is shown while none answers must say how old it is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from ports import free_port
from tuihelpers import SIZE, wait_for

from evaltui.tui.app import make_app
from evaltui.tui.attached import AttachedBackend
from evaltui.tui.widgets.queue_lines import RunsCaption, SchedulerHeader
from evaltui.tui.widgets.runs_table import RunsTable

pytestmark = pytest.mark.anyio


class Serves:
    """Starts ``evaltui serve`` processes (own sessions) and ends each by its group."""

    def __init__(self, env: dict[str, str], port: int) -> None:
        self.env, self.port = env, port
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-m", "evaltui.cli", "serve", "--port",
                                 str(self.port)], env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        self.procs.append(proc)
        url = f"http://127.0.0.1:{self.port}/healthz"
        for _ in range(300):
            try:
                if httpx.get(url, timeout=1).status_code < 500:
                    return proc
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise AssertionError(f"evaltui serve exited {proc.returncode}")
            time.sleep(0.05)
        raise AssertionError("evaltui serve did not answer")

    def end(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def close(self) -> None:
        for proc in self.procs:
            self.end(proc)


@pytest.fixture
def serves(isolated_dirs: dict[str, Path]) -> Iterator[Serves]:
    env = dict(os.environ, EVALTUI_FAKE_GPUS="1x24576")
    env.pop("EVALTUI_TOKEN", None)
    made = Serves(env, free_port())
    try:
        yield made
    finally:
        made.close()


async def test_header_names_the_new_backend_after_a_restart(serves: Serves) -> None:
    first = serves.start()
    backend = AttachedBackend(f"127.0.0.1:{serves.port}", owner="tester")
    backend.start()
    app = make_app(backend, poll_interval=0.3)
    try:
        async with app.run_test(size=SIZE) as pilot:
            def header() -> str:
                return str(app.screen.query_one(SchedulerHeader).content)

            await wait_for(lambda: f"backend pid {first.pid}" in header(), what="first pid")
            serves.end(first)
            await wait_for(lambda: "backend unreachable" in header(), timeout=10,
                           what="the outage")
            # Stale, and marked so: the meters box and the table dim, ages say how old.
            box = app.screen.query_one("#resources")
            await wait_for(lambda: "stale" in str(box.border_title), what="stale meters")
            assert box.has_class("-stale") and app.screen.query_one(RunsTable).has_class(
                "-stale")
            assert "stale" in str(app.screen.query_one(RunsCaption).content)
            second = serves.start()
            assert second.pid != first.pid
            await wait_for(lambda: f"backend pid {second.pid}" in header(), timeout=15,
                           what="the new backend's pid in the header")
            assert f"pid {first.pid}" not in header()
            assert not box.has_class("-stale") and "stale" not in str(box.border_title)
            await pilot.pause()
    finally:
        backend.stop()
