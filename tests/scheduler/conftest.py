"""Scheduler test fixtures: isolated state dir and outputs, schedulers and processes that are
always stopped and killed at teardown, even when a test fails."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from evaltui.scheduler.scheduler import JobScheduler

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # sched_nodesets must import for spec validation

from proctools import scheduler_maker, session_starter  # noqa: E402
from schedhelpers import write_dataset  # noqa: E402
from unixusers import two_users  # noqa: E402, F401 (a fixture of the shared-ledger tests)


@pytest.fixture(autouse=True)
def sched_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Per-test state dir and outputs root; no fake GPUs, audit log or GPU mask leak in."""
    state, outputs = tmp_path / "state", tmp_path / "outputs"
    state.mkdir()
    outputs.mkdir()
    monkeypatch.setenv("EVALTUI_STATE_DIR", str(state))
    monkeypatch.setenv("EVALTUI_OUTPUTS", str(outputs))
    for var in ("EVALTUI_FAKE_GPUS", "EVALTUI_FAKE_GPU_INDEX", "EVALTUI_LEDGER_AUDIT",
                "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    return {"state": state, "outputs": outputs}


@pytest.fixture
def fake_gpus(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    def set_gpus(value: str) -> None:
        monkeypatch.setenv("EVALTUI_FAKE_GPUS", value)

    return set_gpus


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """Ten short episodes (goals 1..3)."""
    return write_dataset(tmp_path / "line.jsonl", [1, 2, 3, 1, 2, 3, 1, 2, 3, 1])


@pytest.fixture
def make_scheduler(sched_env: dict[str, Path]) -> Iterator[Callable[..., JobScheduler]]:
    """Build schedulers (default: fast ticks); all are stopped and their runs killed after."""
    with scheduler_maker(sched_env["outputs"], cancel_grace_sec=2.0) as make:
        yield make


@pytest.fixture
def popen() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start helper processes in their own group; their groups are killed at teardown."""
    with session_starter() as start:
        yield start
