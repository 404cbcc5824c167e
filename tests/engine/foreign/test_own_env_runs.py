"""Runs with a nodeset in a real second environment: numpy 1.x there, 2.x in evaltui's.

The environment is built once per session (uv or pip, from PyPI) into the session's cache;
every test after the first reuses it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from ownenv_helpers import (
    NUMPY1,
    alive,
    cartpole_graph,
    eval_argv,
    eval_env,
    evaltui_eval,
    rows,
    run_dir_of,
)

from evaltui.engine.foreign.envcache import MARKER

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: the suite's wait
from waiting import wait_until  # noqa: E402

OWN = {"requirements": NUMPY1}


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """The reference: the same graph with every nodeset in evaltui's own interpreter."""
    work = tmp_path_factory.mktemp("inproc")
    out = evaltui_eval(work, cartpole_graph(frame_every=7), "--workers", "2")
    assert out.returncode == 0, out.stderr
    return rows(run_dir_of(work))


def test_first_run_builds_and_the_second_builds_nothing(tmp_path: Path,
                                                        in_process: list[dict],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    env_cache = tmp_path / "cache"  # its own: cold, whichever test ran first
    monkeypatch.setenv("EVALTUI_ENV_CACHE", str(env_cache))
    graph = cartpole_graph(OWN, numpy_major=1, frame_every=7)
    t0 = time.monotonic()
    first = evaltui_eval(tmp_path / "a", graph, "--workers", "1")
    first_sec = time.monotonic() - t0
    assert first.returncode == 0, first.stderr
    built = list(env_cache.glob(f"*/{MARKER}"))
    assert len(built) == 1
    stamp = built[0].stat().st_mtime_ns
    t0 = time.monotonic()
    second = evaltui_eval(tmp_path / "b", graph, "--workers", "1")
    second_sec = time.monotonic() - t0
    assert second.returncode == 0, second.stderr
    print(f"\nstart-up to end, 6 episodes: first run {first_sec:.1f} s (built the "
          f"environment: {json.loads(built[0].read_text())['seconds']} s), "
          f"second {second_sec:.1f} s")
    assert "building the environment" in first.stderr
    assert "building the environment" not in second.stderr
    assert list(env_cache.glob(f"*/{MARKER}")) == built and built[0].stat().st_mtime_ns == stamp
    assert rows(run_dir_of(tmp_path / "a")) == in_process  # K=1: as in-process


def test_k3_in_its_own_environment_gives_the_in_process_rows(env_cache: Path, tmp_path: Path,
                                                             in_process: list[dict]) -> None:
    out = evaltui_eval(tmp_path, cartpole_graph(OWN, numpy_major=1, frame_every=7),
                       "--workers", "3")
    assert out.returncode == 0, out.stderr
    got = rows(run_dir_of(tmp_path))
    assert got == in_process
    assert all(r["status"] == "ok" for r in got)
    assert all(r["assets"] for r in got), "frames made over there are the run's PNGs"


def test_a_batched_shared_nodeset_in_its_own_environment_gives_the_same_rows(
        env_cache: Path, tmp_path: Path) -> None:
    ref = evaltui_eval(tmp_path / "ref", cartpole_graph(policy="shared", batched=True),
                       "--workers", "3")
    assert ref.returncode == 0, ref.stderr
    graph = cartpole_graph(OWN, numpy_major=1, policy="shared", batched=True,
                           policy_environment=OWN)
    graph["nodesets"]["policy"]["params"] = {"numpy_major": 1}
    out = evaltui_eval(tmp_path / "own", graph, "--workers", "3")
    assert out.returncode == 0, out.stderr
    assert rows(run_dir_of(tmp_path / "own")) == rows(run_dir_of(tmp_path / "ref"))


def test_an_env_host_sigkilled_mid_episode_is_retried_and_nothing_is_lost(
        env_cache: Path, tmp_path: Path, in_process: list[dict]) -> None:
    watch = tmp_path / "watch"
    watch.mkdir()
    graph = cartpole_graph(OWN, numpy_major=1, frame_every=7, die_once_in=str(watch))
    out = evaltui_eval(tmp_path / "run", graph,
                       eval_fields={"worker_count": 2, "max_episode_retries": 1})
    assert out.returncode == 0, out.stderr
    killed = int((watch / "killed").read_text())
    run_dir = run_dir_of(tmp_path / "run")
    assert rows(run_dir) == in_process  # the killed episode ran again, whole
    row = json.loads((run_dir / "episodes" / "ep0001" / "episode.json").read_text())
    assert row["attempts"] == 2 and row["status"] == "ok"
    hosts = {int(p.name.split(".")[1]) for p in watch.glob("host.*")}
    assert killed in hosts and len(list(watch.glob("host.*"))) >= 2  # and its replacement


def test_without_retries_the_killed_episode_is_an_error_naming_the_signal(
        env_cache: Path, tmp_path: Path) -> None:
    watch = tmp_path / "watch"
    watch.mkdir()
    graph = cartpole_graph(OWN, numpy_major=1, die_once_in=str(watch))
    out = evaltui_eval(tmp_path / "run", graph, eval_fields={"worker_count": 1})
    got = {r["episode_id"]: r for r in rows(run_dir_of(tmp_path / "run"))}
    assert got["cp-1"]["status"] == "error", out.stderr
    assert "went away during call 'step' (killed by SIGKILL)" in got["cp-1"]["error"]
    assert all(r["status"] == "ok" for k, r in got.items() if k != "cp-1")  # restarted


def run_hosts(watch: Path) -> list[psutil.Process]:
    """The env hosts alive now that a run process started (through its workers)."""
    found = []
    for path in watch.glob("host.*"):
        try:
            proc = psutil.Process(int(path.name.split(".")[1]))
            if any("evaltui.engine.main" in " ".join(p.cmdline()) for p in proc.parents()):
                found.append(proc)
        except psutil.Error:
            continue  # gone already
    return found


@contextlib.contextmanager
def eval_with_two_hosts(argv: list[str], work: Path, watch: Path, err: Path
                        ) -> Iterator[tuple[list[psutil.Process], psutil.Process]]:
    """``evaltui eval`` started in its own group until two env hosts of its run show:
    those hosts and the run process (not a worker). The group is SIGKILLed on the way out."""
    with err.open("wb") as sink:
        cli = subprocess.Popen(argv, cwd=work, env=eval_env(), stdout=subprocess.DEVNULL,
                               stderr=sink, start_new_session=True)

    def two_hosts() -> bool:
        # A run that ended before its hosts showed says why, rather than a bare time-out.
        assert cli.poll() is None, f"eval exited {cli.returncode}: {err.read_text()[-2000:]}"
        return len(run_hosts(watch)) >= 2

    try:
        # The hosts of the run's workers (a host the spec check started to describe the
        # class has recorded its PID too, and is gone by then).
        try:
            wait_until(two_hosts, timeout=120, what="two env hosts")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; eval said: {err.read_text()[-2000:]}") from None
        hosts = run_hosts(watch)
        # the outermost evaltui.engine.main above a host: the run (the zygote and the
        # workers it forks carry the same command line)
        yield hosts, [p for p in hosts[0].parents()
                      if "evaltui.engine.main" in " ".join(p.cmdline())][-1]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cli.pid, signal.SIGKILL)
        cli.wait(timeout=30)


def test_killing_the_run_leaves_no_env_host_alive(env_cache: Path, tmp_path: Path) -> None:
    watch = tmp_path / "watch"
    watch.mkdir()
    (watch / "killed").write_text("0")  # hosts record their PIDs here, and none kills itself
    work = tmp_path / "run"
    # a second a step: the run outlives the wait for its two hosts (the dataset's step
    # budget of 30 ends an episode whatever max_steps says: without the sleep a loaded
    # machine saw the run end before its second host was seen)
    graph = cartpole_graph(OWN, numpy_major=1, die_once_in=str(watch), step_sleep_ms=1000)
    argv = eval_argv(work, graph, "--workers", "2", episodes=4)
    with eval_with_two_hosts(argv, work, watch, tmp_path / "eval.stderr") as (hosts, run):
        os.kill(run.pid, signal.SIGKILL)  # the run alone, not its process group
        wait_until(lambda: not alive(hosts), timeout=20, what="the env hosts to die")


def test_requirements_that_cannot_be_resolved_fail_the_submit_naming_the_build_log(
        env_cache: Path, tmp_path: Path) -> None:
    graph = cartpole_graph({"requirements": ["numpy<2", "evaltui-no-such-package-x==9.9"]})
    out = evaltui_eval(tmp_path, graph)
    assert out.returncode == 2, out.stderr
    line = next(ln for ln in out.stderr.splitlines() if "cannot build the environment" in ln)
    assert "evaltui-no-such-package-x" in line and "graph.nodesets.env.environment" in line
    log = Path(line.rsplit("build log: ", 1)[1].rstrip(")"))
    assert log.is_file() and "evaltui-no-such-package-x" in log.read_text()
    assert not list(env_cache.glob(f"{log.name.split('.')[0]}/{MARKER}"))  # nothing half-built


def test_a_cancel_ends_episodes_cancelled_not_error_and_no_env_host_stays(
        env_cache: Path, tmp_path: Path) -> None:
    watch = tmp_path / "watch"
    watch.mkdir()
    (watch / "killed").write_text("0")  # hosts record their PIDs here, and none kills itself
    work = tmp_path / "run"
    graph = cartpole_graph(OWN, numpy_major=1, die_once_in=str(watch), step_sleep_ms=20)
    argv = eval_argv(work, graph, "--workers", "2", episodes=12)
    with eval_with_two_hosts(argv, work, watch, tmp_path / "eval.stderr") as (hosts, run):
        run_dir = run_dir_of(work)
        wait_until(lambda: any(p.stat().st_size for p in
                               (run_dir / "episodes").glob("ep*/log.jsonl")),
                   what="episodes in flight")
        os.killpg(os.getpgid(run.pid), signal.SIGTERM)  # the whole group, env hosts too
        wait_until(lambda: (run_dir / "_DONE").exists(), timeout=60, what="the run to end")
        wait_until(lambda: not alive(hosts), timeout=20, what="the env hosts to exit")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "cancelled"
    got = rows(run_dir)
    statuses = [r["status"] for r in got]  # a pole that fell ended its episode ok before
    assert "cancelled" in statuses and set(statuses) <= {"ok", "cancelled"}, \
        [r["error"] for r in got]
