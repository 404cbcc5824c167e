"""Specs, NVML readings and the holder process for the gpu tests."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctools import kill_group

from evaltui.gpu.cudadriver import LIBCUDA
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.admission.resources import GpuSnapshot, NvmlProbe

# tests/ holds the suite-wide helpers; driver scripts run from their own folder need it too.
_TESTS_DIR = str(Path(__file__).resolve().parents[1])
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
from waiting import wait_until as _wait_until  # noqa: E402

HERE = Path(__file__).resolve().parent
MODULE = "gpu_nodesets"
SLACK_MB = 256
"""Tolerance for readings of a GPU other processes may use a little of meanwhile (and
for the driver's rounding of allocations to its pages)."""


@dataclass(frozen=True)
class GpuUnderTest:
    """The one GPU a test runs on (the scheduler sees only it, through CUDA_VISIBLE_DEVICES)."""

    index: int
    name: str
    total_mb: int
    context_mb: int
    """What a process's CUDA context alone costs on it, measured with the holder process."""
    alloc_mb: int
    """A size each test allocation may use: small next to the free memory, large next to
    the readings' noise."""


_probe = NvmlProbe()
"""One NVML handle for the whole session (an init per reading can take long where the
driver is not kept loaded by persistence mode); NVML is thread-safe."""


def read_gpu(index: int) -> GpuSnapshot:
    """One NVML reading of GPU ``index``, through the scheduler's own probe."""
    reading = _probe.read()
    assert reading.available, reading.reason
    return next(g for g in reading.gpus if g.index == index)


def libcuda_loads() -> bool:
    """Whether the CUDA driver library loads on this machine."""
    try:
        ctypes.CDLL(LIBCUDA)
    except OSError:
        return False
    return True


def used_by(gpu: GpuSnapshot, pids: set[int]) -> int | None:
    """MiB NVML attributes to ``pids`` on ``gpu``; None when it attributes nothing."""
    if gpu.processes is None:
        return None
    return sum(p.used_mb for p in gpu.processes if p.pid in pids)


def session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def write_dataset(path: Path, goals: list[int]) -> Path:
    with open(path, "w") as fh:
        for i, goal in enumerate(goals):
            fh.write(json.dumps({"episode_id": f"line-{i}", "scene_id": f"len{goal}",
                                 "instruction": f"walk to {goal}", "goal": goal,
                                 "reference_path": [[float(x), 0.0] for x in range(goal + 1)],
                                 "geodesic_distance": float(goal)}) + "\n")
    return path


def holding_spec(dataset: Path, *, placement: str, vram_mb: int, marginal_vram_mb: int,
                 episodes: int, sleep_sec: float = 0.15, workers: int = 1,
                 exclusive: bool = False, tag: str = "") -> dict[str, Any]:
    """A line-walking job whose ``placement`` nodeset holds ``vram_mb`` MiB per instance:
    ``replicated`` (the env, one per worker), ``inline`` or ``shared`` (the policy)."""
    env_mb = vram_mb if placement == "replicated" else 0
    policy_mb = 0 if placement == "replicated" else vram_mb
    return {
        "graph": {
            "name": "gpu-line",
            "nodesets": {
                "env": {"impl": f"{MODULE}:HoldingLineEnv", "parallelism": "replicated",
                        "params": {"vram_mb": env_mb}},
                "policy": {"impl": f"{MODULE}:HoldingPolicy",
                           "parallelism": "shared" if placement == "shared" else "inline",
                           "params": {"vram_mb": policy_mb, "sleep_sec": sleep_sec,
                                      "tag": tag}},
            },
            "nodes": {"policy": {"nodeset": "policy", "op": "act"},
                      "env_step": {"nodeset": "env", "op": "step"}},
            "edges": [["@obs", "policy.obs"], ["policy.action", "env_step.action"]],
            "loop": {"env": "env", "step": "env_step"},
        },
        "eval": {"dataset": str(dataset), "step_budget": 50, "episode_count": episodes,
                 "worker_count": workers},
        "scheduling": {"marginal_vram_mb": marginal_vram_mb, "exclusive_gpu": exclusive},
        "active_workspace_dir": str(HERE),
    }


def record(outputs: Path, run_id: str) -> dict[str, Any]:
    """The run's scheduler.json."""
    return read_json(runs_root(outputs) / run_id / "scheduler.json")


def summary(outputs: Path, run_id: str) -> dict[str, Any]:
    """The run's summary.json (the on-disk contract, DESIGN §2)."""
    return read_json(runs_root(outputs) / run_id / "summary.json")



def wait_until(cond: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """:func:`tests.waiting.wait_until` with this folder's default deadline."""
    return _wait_until(cond, timeout, what)


class Holder:
    """``python -m evaltui.gpu.hold`` in its own session: holds memory on command.

    Use it as a context manager: on the way out it is asked to exit, and its process group
    is killed if it has not.
    """

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "evaltui.gpu.hold"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env, start_new_session=True)
        try:
            self.state = self._answer()
        except BaseException:
            self.__exit__()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def command(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        self.state = self._answer()
        return self.state

    def exit(self) -> int:
        """Close its input (it frees everything and exits); returns its exit code."""
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.proc.wait(timeout=60)

    def __enter__(self) -> Holder:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.exit()
        except subprocess.TimeoutExpired:
            pass
        finally:
            if self.proc.poll() is None:
                kill_group(self.proc.pid)
                self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the holder exited (code {self.proc.poll()}) without answering"
        answer = json.loads(line)
        assert "error" not in answer, answer["error"]
        return answer
