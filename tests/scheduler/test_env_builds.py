"""A run whose nodeset's own environment is not built yet is queued at once and waits for
its build (on a builder thread of the scheduler), with the reason said as it goes; two runs
asking for the same environment build it once; a failed build fails the run with one line
naming its log; a scheduler killed mid-build loses nothing. Real builds (uv, else pip) of
a real package whose build waits for a gate (gatedpkg.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from gatedpkg import builders, gated_package  # tests/: on sys.path (its conftest)
from schedhelpers import line_spec, record, wait_until
from test_restart import start_driver

from evaltui.api.backend_start import start_backend
from evaltui.api.client import ApiClient
from evaltui.contract.states import RunState
from evaltui.engine.foreign.envcache import MARKER
from evaltui.scheduler.scheduler import JobScheduler

Make = Callable[..., JobScheduler]
REASON = re.compile(r"^building environment for nodeset policy \((uv|pip), (\d+) s so far\)$")


@pytest.fixture
def env_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cold cache of its own (the schedulers' run processes inherit it)."""
    cache = tmp_path / "envcache"
    monkeypatch.setenv("EVALTUI_ENV_CACHE", str(cache))
    return cache


def own_env_spec(dataset: Path, requirements: list[str], **params: Any) -> dict[str, Any]:
    """The line graph with its policy in an environment built from ``requirements``."""
    spec = line_spec(dataset, episodes=2)
    spec["graph"]["nodesets"]["policy"] = {
        "impl": "own_env_policy:LinePolicyOwnEnv", "parallelism": "replicated",
        "params": params, "environment": {"requirements": requirements}}
    return spec


def venv_lines(cache: Path) -> list[str]:
    """The build steps that made a venv, over every build log in the cache."""
    return [line for log in cache.glob("*.log") for line in log.read_text().splitlines()
            if line.startswith("$ ") and " venv " in line]


def test_an_unbuilt_environment_is_built_while_its_runs_wait_in_the_queue(
        make_scheduler: Make, dataset: Path, env_cache: Path, tmp_path: Path) -> None:
    requirement, gate = gated_package(tmp_path / "pkg")
    sched = make_scheduler()
    spec = own_env_spec(dataset, [requirement], needs="gatedpkg")
    # The gate is shut: a submit that built would never return.
    first, state = sched.submit(spec)
    second, _ = sched.submit(spec)
    assert state is RunState.QUEUED
    sched.start()

    def reasons() -> list[str]:
        return [q.waiting_reason for q in sched.queue()]

    said = wait_until(lambda: (r := reasons()) and all(REASON.match(x) for x in r) and r,
                      60, "both runs wait for the build")
    assert [q.run_id for q in sched.queue()] == [first, second]
    assert sched.resources().ledger == []  # waiting for a build holds no memory
    # Said as it goes: the seconds move, and reach scheduler.json (read by whoever reads the file).
    wait_until(lambda: int(REASON.match(reasons()[0])[2]) >= 1, 60, "the seconds move")
    on_disk = wait_until(lambda: (rec := record(sched.outputs, first))["waiting_kind"]
                         == "building" and REASON.match(rec["waiting_reason"])
                         and int(REASON.match(rec["waiting_reason"])[2]) >= 1 and rec, 30,
                         "the reason on disk")
    assert on_disk["state"] == "queued" and said
    served = start_backend(sched, port=0)  # the API's queue, and evaltui ls through it
    try:
        client = ApiClient(served.url, served.token)
        assert all(REASON.match(q.waiting_reason) for q in client.queue())
        client.close()
        ls = subprocess.run([sys.executable, "-m", "evaltui.cli", "ls"], capture_output=True,
                            text=True, timeout=60, env={**os.environ, "COLUMNS": "250",
                                                        "BACKEND_URL": served.url})
    finally:
        served.stop()
    assert "building environment for nodeset policy" in ls.stdout, ls.stdout + ls.stderr
    assert len(builders(tmp_path / "pkg")) == 1  # one build for the two runs

    gate.touch()
    assert sched.wait(first, 120) is RunState.DONE
    assert sched.wait(second, 120) is RunState.DONE
    assert len(venv_lines(env_cache)) == 1, "built once for both"
    assert len(list(env_cache.glob(f"*/{MARKER}"))) == 1
    # A later run finds it built: queued and admitted without a build.
    third, _ = sched.submit(spec)
    assert sched.wait(third, 120) is RunState.DONE
    assert len(venv_lines(env_cache)) == 1


def test_a_failed_build_fails_the_run_with_one_line_naming_its_log(
        make_scheduler: Make, dataset: Path, env_cache: Path) -> None:
    sched = make_scheduler().start()
    run_id, state = sched.submit(own_env_spec(
        dataset, ["evaltui-test-no-such-package-zq9==1.0"]))
    assert state is RunState.QUEUED
    assert sched.wait(run_id, 120) is RunState.FAILED
    error = record(sched.outputs, run_id)["error"]
    assert "\n" not in error
    assert error.startswith("cannot build the environment of nodeset 'policy': ")
    log = re.search(r"\(build log: (\S+\.log)\)$", error)
    assert log is not None, error
    assert "evaltui-test-no-such-package-zq9" in Path(log[1]).read_text()
    assert list(env_cache.glob(f"*/{MARKER}")) == []  # nothing half-built left


def test_a_module_that_fails_in_its_built_environment_fails_the_run_naming_it(
        make_scheduler: Make, dataset: Path, env_cache: Path, tmp_path: Path) -> None:
    requirement, gate = gated_package(tmp_path / "pkg")
    gate.touch()
    sched = make_scheduler().start()
    spec = own_env_spec(dataset, [requirement])
    spec["graph"]["nodesets"]["policy"]["impl"] = "own_env_policy:NoSuchPolicy"
    run_id, state = sched.submit(spec)  # unbuilt: the class is checked once it is built
    assert state is RunState.QUEUED
    assert sched.wait(run_id, 120) is RunState.FAILED
    error = record(sched.outputs, run_id)["error"]
    assert error.startswith("graph.nodesets.policy.impl: ") and "NoSuchPolicy" in error


def test_a_scheduler_killed_mid_build_loses_nothing(
        popen: Callable[..., subprocess.Popen[bytes]], make_scheduler: Make,
        fake_gpus: Callable[[str], None], dataset: Path, env_cache: Path,
        tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    requirement, gate = gated_package(pkg)
    driver, (run_id,) = start_driver(popen, tmp_path, [
        {"spec": own_env_spec(dataset, [requirement], needs="gatedpkg")}])
    (building,) = wait_until(lambda: builders(pkg), 60, "the build under way")
    os.kill(driver.pid, signal.SIGKILL)  # the scheduler alone: its build dies with it
    driver.wait()
    wait_until(lambda: not psutil.pid_exists(building) or
               psutil.Process(building).status() == psutil.STATUS_ZOMBIE, 30,
               "the killed scheduler's build gone")
    rec = record(Path(os.environ["EVALTUI_OUTPUTS"]), run_id)
    assert rec["state"] == "queued" and rec["waiting_kind"] == "building"
    assert list(env_cache.glob(f"*/{MARKER}")) == []  # no half-built environment in use

    gate.touch()
    sched = make_scheduler().start()  # takes the queued run over, builds again
    assert sched.wait(run_id, 120) is RunState.DONE
    assert len(builders(pkg)) == 2
    assert len(list(env_cache.glob(f"*/{MARKER}"))) == 1
    assert json.loads(next(env_cache.glob(f"*/{MARKER}")).read_text())["builder"] in (
        "uv", "pip")


def test_a_run_cancelled_while_it_waits_for_its_build_resumes_into_the_same_build(
        make_scheduler: Make, dataset: Path, env_cache: Path, tmp_path: Path) -> None:
    requirement, gate = gated_package(tmp_path / "pkg")
    sched = make_scheduler().start()
    run_id, _ = sched.submit(own_env_spec(dataset, [requirement], needs="gatedpkg"))
    wait_until(lambda: (q := sched.queue()) and REASON.match(q[0].waiting_reason), 60,
               "the run waits for its build")
    assert sched.cancel(run_id) is RunState.CANCELLED  # at once: the build goes on
    assert sched.resume(run_id) is RunState.QUEUED  # the gate is shut: resume built nothing
    wait_until(lambda: (q := sched.queue()) and REASON.match(q[0].waiting_reason), 60,
               "the resumed run waits for the build")
    gate.touch()
    assert sched.wait(run_id, 120) is RunState.DONE
    assert len(builders(tmp_path / "pkg")) == 1 and len(venv_lines(env_cache)) == 1
