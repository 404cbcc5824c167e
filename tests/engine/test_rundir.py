"""evaltui.rundir on real files and real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import psutil
import pytest

from evaltui.contract.pidref import PidRef
from evaltui.contract.states import RunState
from evaltui.rundir.jsonfiles import read_json, sync_files, touch_done, write_json_atomic
from evaltui.rundir.layout import (
    allocate_run_dir,
    episode_dir,
    episode_index_from_dirname,
    is_run_id,
    outputs_root,
    runs_root,
    state_dir,
)
from evaltui.rundir.logread import iter_log, read_log
from evaltui.rundir.status import RunStatus, derive_run_state, read_run_status

FIXED_NOW = datetime(2026, 1, 2, 3, 4, 5)


@pytest.fixture
def spawn_child() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start child processes that are killed and reaped at teardown, even on failure."""
    procs: list[subprocess.Popen[str]] = []

    def start(args: list[str], **kwargs: Any) -> subprocess.Popen[str]:
        proc = subprocess.Popen(args, text=True, **kwargs)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def dead_pidref(spawn_child: Callable[..., subprocess.Popen[str]]) -> PidRef:
    """The identity of a child process that has exited and been reaped (PidRef.of works on
    a zombie, so the race with its exit is harmless)."""
    proc = spawn_child([sys.executable, "-c", "pass"])
    ref = PidRef.of(proc.pid)
    proc.wait(timeout=30)
    return ref


# --- locations ---------------------------------------------------------------------------


def test_outputs_root_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVALTUI_OUTPUTS", raising=False)
    assert outputs_root() == tmp_path.resolve() / "outputs"
    monkeypatch.setenv("EVALTUI_OUTPUTS", "env_out")
    assert outputs_root() == tmp_path.resolve() / "env_out"
    assert outputs_root(tmp_path / "cli_out") == tmp_path.resolve() / "cli_out"
    assert outputs_root("rel").is_absolute()
    assert runs_root(tmp_path) == tmp_path / "eval_runs"


def test_state_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("EVALTUI_STATE_DIR", str(tmp_path / "explicit"))
    assert state_dir() == tmp_path / "explicit"

    monkeypatch.delenv("EVALTUI_STATE_DIR")
    assert state_dir() == tmp_path / "xdg" / "evaltui"

    monkeypatch.delenv("XDG_STATE_HOME")
    home_dir = tmp_path / "home" / ".local" / "state" / "evaltui"
    assert state_dir() == home_dir

    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    assert state_dir() == home_dir

    for created in (tmp_path / "explicit", tmp_path / "xdg" / "evaltui", home_dir):
        assert created.is_dir()
        assert created.stat().st_mode & 0o777 == 0o700


# --- run ids -----------------------------------------------------------------------------


def test_allocate_run_dir_uses_local_timestamp_and_suffixes(tmp_path: Path) -> None:
    outputs = tmp_path / "not" / "yet" / "there"
    names = [allocate_run_dir(outputs, now=FIXED_NOW).name for _ in range(3)]
    assert names == ["20260102_030405", "20260102_030405_2", "20260102_030405_3"]
    assert all((runs_root(outputs) / n).is_dir() for n in names)

    fresh = allocate_run_dir(outputs)
    assert is_run_id(fresh.name)
    assert fresh.parent == runs_root(outputs)


_ALLOCATE_CHILD = textwrap.dedent(
    """
    import sys, time
    from datetime import datetime
    from pathlib import Path
    from evaltui.rundir.layout import allocate_run_dir

    outputs, go = Path(sys.argv[1]), Path(sys.argv[2])
    print("ready", flush=True)
    deadline = time.monotonic() + 30
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    now = datetime(2026, 1, 2, 3, 4, 5)
    for _ in range(10):
        print(allocate_run_dir(outputs, now=now).name, flush=True)
    """
)


def test_allocate_run_dir_is_atomic_across_processes(
    tmp_path: Path, spawn_child: Callable[..., subprocess.Popen[str]]
) -> None:
    outputs, go = tmp_path / "outputs", tmp_path / "go"
    procs = [
        spawn_child(
            [sys.executable, "-c", _ALLOCATE_CHILD, str(outputs), str(go)],
            stdout=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    for proc in procs:  # all three are waiting before any of them allocates
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    go.touch()

    claimed: list[str] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        claimed.extend(out.split())

    assert len(claimed) == 30
    assert len(set(claimed)) == 30
    assert sorted(p.name for p in runs_root(outputs).iterdir()) == sorted(claimed)
    assert all(is_run_id(name) for name in claimed)


@pytest.mark.parametrize(
    "name",
    ["20260101_000000", "20260101_000000_2", "20260101_000000_10", "20260101_235959_123"],
)
def test_is_run_id_accepts(name: str) -> None:
    assert is_run_id(name)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "..",
        "../x",
        "a/b",
        "20260101_000000/..",
        "20260101_000000_1",
        "20260101_000000_0",
        "20260101_000000_02",
        "20260101_000000_",
        "2026010_000000",
        "20260101-000000",
        "20260101_000000\n",
        "２0260101_000000",  # a non-ASCII digit
    ],
)
def test_is_run_id_rejects(name: str) -> None:
    assert not is_run_id(name)


# --- episode dirs ------------------------------------------------------------------------


def test_episode_dir_names_round_trip(tmp_path: Path) -> None:
    assert episode_dir(tmp_path, 7) == tmp_path / "episodes" / "ep0007"
    assert episode_dir(tmp_path, 12345).name == "ep12345"
    for index in (0, 7, 9999, 12345):
        assert episode_index_from_dirname(episode_dir(tmp_path, index).name) == index
    for bad in ("ep12", "ep00012", "ep0012x", "episode0001", "", "ep-001"):
        assert episode_index_from_dirname(bad) is None
    with pytest.raises(ValueError):
        episode_dir(tmp_path, -1)


# --- atomic JSON -------------------------------------------------------------------------


def test_write_json_atomic_round_trip_options(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    write_json_atomic(path, {"a": np.arange(3), 1: "int key", "f": np.float32(0.5)})
    assert read_json(path) == {"a": [0, 1, 2], "1": "int key", "f": 0.5}
    assert b"\n  " in path.read_bytes()  # indented, for humans reading run dirs


def test_readers_never_see_half_a_file(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    write_json_atomic(path, {"i": -1, "rows": []})
    stop = threading.Event()
    reads = 0
    failures: list[BaseException] = []

    def reader() -> None:
        nonlocal reads
        last = -1
        while not stop.is_set():
            try:
                obj = read_json(path)
                assert obj["i"] >= last and len(obj["rows"]) in (0, 2000)
                last = obj["i"]
                reads += 1
            except BaseException as exc:  # report anything, in the test thread
                failures.append(exc)
                return

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(200):
            rows = [{"episode_index": k, "pad": "x" * i} for k in range(2000)]
            write_json_atomic(path, {"i": i, "rows": rows})
    finally:
        stop.set()
        thread.join(timeout=30)

    assert not failures, failures[0]
    assert reads > 0
    assert read_json(path)["i"] == 199
    assert list(tmp_path.iterdir()) == [path]  # no temp file left behind


def test_write_json_atomic_leaves_nothing_on_failure(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    write_json_atomic(path, {"ok": True})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"bad": object()})
    assert read_json(path) == {"ok": True}

    blocker = tmp_path / "dir.json"  # os.replace cannot replace a non-empty directory
    blocker.mkdir()
    (blocker / "keep").touch()
    with pytest.raises(OSError):
        write_json_atomic(blocker, {"x": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.json", "x.json"]


def test_touch_done(tmp_path: Path) -> None:
    assert touch_done(tmp_path) == tmp_path / "_DONE"
    assert (tmp_path / "_DONE").is_file()
    touch_done(tmp_path)  # idempotent


# --- log.jsonl ---------------------------------------------------------------------------


def _line(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


def test_iter_log_ignores_partial_trailing_line_until_complete(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    first, second = _line({"event": "episode_start"}), _line({"event": "fire", "step": 0})
    partial = b'{"event": "fire", "st'
    log.write_bytes(first + second + partial)

    records, resume = read_log(log)
    assert records == [(0, {"event": "episode_start"}), (len(first), {"event": "fire", "step": 0})]
    assert resume == len(first) + len(second)
    assert list(iter_log(log, resume)) == []

    with open(log, "ab") as f:
        f.write(b'ep": 1}\n')
    records, resume2 = read_log(log, resume)
    assert records == [(resume, {"event": "fire", "step": 1})]
    assert resume2 == log.stat().st_size


def test_iter_log_reports_corrupt_lines_and_goes_on(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    garbage = b"\xff not json " + b"y" * 500 + b"\n"
    log.write_bytes(_line({"step": 0}) + garbage + b"\n" + b"[1, 2]\n" + _line({"step": 1}))

    records = [rec for _, rec in iter_log(log)]
    assert records[0] == {"step": 0}
    assert records[1]["event"] == "corrupt"
    assert records[1]["raw"].startswith("\ufffd not json")
    assert len(records[1]["raw"]) == 200
    assert records[1]["error"]
    assert records[2]["event"] == "corrupt"  # valid JSON, but not a record
    assert records[3] == {"step": 1}
    assert len(records) == 4  # the blank line is skipped


def test_iter_log_across_chunk_boundaries(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    expected: list[tuple[int, dict[str, Any]]] = []
    offset = 0
    with open(log, "wb") as f:
        for step in range(6000):
            # One line longer than a whole read chunk, the rest of varying lengths.
            pad = "z" * (1_500_000 if step == 2500 else (step * 37) % 700)
            rec = {"step": step, "pad": pad}
            data = _line(rec)
            f.write(data)
            expected.append((offset, rec))
            offset += len(data)
        f.write(b'{"step": "partial')
    assert offset > 2 * 1024 * 1024

    records, resume = read_log(log)
    assert records == expected
    assert resume == offset

    mid_offset, _ = expected[4000]
    assert list(iter_log(log, mid_offset)) == expected[4000:]
    with open(log, "rb") as f:  # every offset points at the start of its line
        for off, rec in expected[::500]:
            f.seek(off)
            assert orjson.loads(f.readline()) == rec


# --- PidRef ------------------------------------------------------------------------------


def test_pidref_current_process_is_alive() -> None:
    me = PidRef.current()
    assert me.pid == os.getpid()
    assert me.alive()
    assert PidRef.of(os.getpid()) == me


def test_pidref_with_other_create_time_is_not_alive() -> None:
    me = PidRef.current()
    assert not PidRef(me.pid, me.create_time - 5.0).alive()
    assert not PidRef(me.pid, me.create_time + 1.0).alive()
    assert PidRef(me.pid, me.create_time + 0.3).alive()  # clock rounding tolerance


def test_pidref_of_finished_child_is_not_alive(dead_pidref: PidRef) -> None:
    assert not dead_pidref.alive()
    assert not PidRef(0, 0.0).alive()
    assert not PidRef(-1, 0.0).alive()


def test_pidref_of_zombie_is_not_alive(
    spawn_child: Callable[..., subprocess.Popen[str]],
) -> None:
    proc = spawn_child([sys.executable, "-c", "pass"])
    ref = PidRef.of(proc.pid)
    deadline = time.monotonic() + 30
    while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "child never became a zombie"
        time.sleep(0.01)
    assert proc.returncode is None  # not reaped yet: still a zombie
    assert not ref.alive()
    assert proc.wait(timeout=10) == 0


# --- run state ---------------------------------------------------------------------------


def _make_run(
    run_dir: Path,
    *,
    scheduler: dict[str, Any] | None = None,
    summary_status: str | None = None,
    done: bool = False,
) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    if scheduler is not None:
        write_json_atomic(run_dir / "scheduler.json", scheduler)
    if summary_status is not None:
        write_json_atomic(run_dir / "summary.json", {"status": summary_status})
    if done:
        touch_done(run_dir)
    return run_dir


def _sched(ref: PidRef | None = None, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"state": "running", "priority": 0, "queued_at": 1.0}
    if ref is not None:
        record.update(pid=ref.pid, pid_create_time=ref.create_time)
    record.update(extra)
    return record


def test_state_queued(tmp_path: Path) -> None:
    run = _make_run(tmp_path, scheduler=_sched(state="queued", pid=None))
    assert derive_run_state(run) is RunState.QUEUED


def test_state_starting_and_running(tmp_path: Path) -> None:
    run = _make_run(tmp_path, scheduler=_sched(PidRef.current()))
    assert derive_run_state(run) is RunState.STARTING
    _make_run(run, summary_status="running")
    assert derive_run_state(run) is RunState.RUNNING


def test_state_running_while_cancel_pending(tmp_path: Path) -> None:
    sched = _sched(PidRef.current(), cancel_requested_at=2.0)
    run = _make_run(tmp_path, scheduler=sched, summary_status="running")
    assert derive_run_state(run) is RunState.RUNNING


@pytest.mark.parametrize("with_scheduler", [True, False])
def test_state_done(tmp_path: Path, dead_pidref: PidRef, with_scheduler: bool) -> None:
    sched = _sched(dead_pidref, exit_code=0) if with_scheduler else None
    run = _make_run(tmp_path, scheduler=sched, summary_status="done", done=True)
    assert derive_run_state(run) is RunState.DONE


def test_state_done_wins_over_a_process_still_exiting(tmp_path: Path) -> None:
    run = _make_run(tmp_path, scheduler=_sched(PidRef.current()), summary_status="done", done=True)
    assert derive_run_state(run) is RunState.DONE


@pytest.mark.parametrize(
    ("summary_status", "done", "exit_code"),
    [("failed", True, 1), ("failed", False, None), ("failed", False, -9)],
)
def test_state_failed(
    tmp_path: Path,
    dead_pidref: PidRef,
    summary_status: str | None,
    done: bool,
    exit_code: int | None,
) -> None:
    sched = _sched(dead_pidref, exit_code=exit_code)
    run = _make_run(tmp_path, scheduler=sched, summary_status=summary_status, done=done)
    assert derive_run_state(run) is RunState.FAILED


@pytest.mark.parametrize(
    ("sched_extra", "summary_status", "done"),
    [
        ({"cancel_requested_at": 2.0, "exit_code": -15}, "running", False),
        ({"cancel_requested_at": 2.0}, None, False),
        ({}, "cancelled", True),
        ({"exit_code": 0}, "cancelled", False),
    ],
)
def test_state_cancelled(
    tmp_path: Path,
    dead_pidref: PidRef,
    sched_extra: dict[str, Any],
    summary_status: str | None,
    done: bool,
) -> None:
    run = _make_run(
        tmp_path,
        scheduler=_sched(dead_pidref, **sched_extra),
        summary_status=summary_status,
        done=done,
    )
    assert derive_run_state(run) is RunState.CANCELLED


def test_state_cancelled_while_queued(tmp_path: Path) -> None:
    sched = _sched(state="queued", pid=None, cancel_requested_at=2.0)
    assert derive_run_state(_make_run(tmp_path, scheduler=sched)) is RunState.CANCELLED


def test_state_aborted_dead_pid_without_done(tmp_path: Path, dead_pidref: PidRef) -> None:
    run = _make_run(tmp_path, scheduler=_sched(dead_pidref), summary_status="running")
    assert derive_run_state(run) is RunState.ABORTED
    # Even a summary that says done is not a finished run without _DONE.
    _make_run(run, summary_status="done")
    assert derive_run_state(run) is RunState.ABORTED


@pytest.mark.parametrize(("summary_status", "exit_code", "note"), [
    ("running", -9, "killed by signal 9 (SIGKILL)"),
    (None, -15, "killed by signal 15 (SIGTERM)"),
    ("running", 1, "exited 1 without a terminal summary; see run.log"),
    (None, None, "process vanished (no _DONE, no terminal summary)"),
])
def test_state_aborted_says_why_when_dead_without_a_terminal_summary(
        tmp_path: Path, dead_pidref: PidRef, summary_status: str | None, exit_code: int | None,
        note: str) -> None:
    """Issue 10: a SIGKILLed run was read as failed (exit -9); failed needs a written error."""
    run = _make_run(tmp_path, scheduler=_sched(dead_pidref, exit_code=exit_code),
                    summary_status=summary_status)
    status = read_run_status(run)
    assert status.state is RunState.ABORTED
    assert status.note == note


@pytest.mark.parametrize(("exit_code", "cancel", "state"), [
    (0, None, RunState.DONE), (1, None, RunState.FAILED), (3, None, RunState.CANCELLED),
    (0, 2.0, RunState.CANCELLED)])
def test_a_torn_summary_with_done_is_judged_by_done_and_the_exit_code(
        tmp_path: Path, dead_pidref: PidRef, exit_code: int, cancel: float | None,
        state: RunState) -> None:
    """Issue 10: a torn summary.json with _DONE present read 'aborted'."""
    run = _make_run(tmp_path, scheduler=_sched(dead_pidref, exit_code=exit_code,
                                               cancel_requested_at=cancel), done=True)
    (run / "summary.json").write_bytes(b'{"status": "done", "episo')
    status = read_run_status(run)
    assert status.state is state
    assert status.summary_unreadable and status.summary is None


def test_state_aborted_reused_pid(tmp_path: Path) -> None:
    me = PidRef.current()  # live pid, but started at another time: not our run
    sched = _sched(PidRef(me.pid, me.create_time - 100.0))
    run = _make_run(tmp_path, scheduler=sched, summary_status="running")
    assert derive_run_state(run) is RunState.ABORTED


def test_state_aborted_copied_run_dir(tmp_path: Path) -> None:
    assert derive_run_state(_make_run(tmp_path / "a", summary_status="running")) is RunState.ABORTED
    assert derive_run_state(_make_run(tmp_path / "b")) is RunState.ABORTED


def test_corrupt_files_do_not_raise_and_are_named(tmp_path: Path) -> None:
    run = _make_run(tmp_path, scheduler=_sched(PidRef.current()))
    (run / "summary.json").write_bytes(b'{"status": "runn')
    status = read_run_status(run)
    assert status.summary is None
    assert status.error is not None and status.error.startswith("summary.json is not valid JSON")
    assert status.state is RunState.RUNNING  # the file exists: the run got that far
    assert status.scheduler is not None and status.scheduler["pid"] == os.getpid()

    (run / "scheduler.json").write_bytes(b"[1, 2]")
    status = read_run_status(run)
    assert status.state is RunState.ABORTED
    assert status.scheduler is None
    assert "scheduler.json is not a JSON object" in (status.error or "")
    assert "summary.json" in (status.error or "")


def test_a_symlink_out_of_the_run_dir_is_not_read_by_the_status_read(tmp_path: Path) -> None:
    """A copied run dir whose scheduler.json and summary.json lead out of it: the status read
    takes nothing from the files outside (no PID to call live, no status to call done)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    write_json_atomic(outside / "scheduler.json", _sched(PidRef.current(), secret="SECRET"))
    write_json_atomic(outside / "summary.json", {"status": "done", "secret": "SECRET"})
    run = _make_run(tmp_path / "run", done=True)
    for name in ("scheduler.json", "summary.json"):
        (run / name).symlink_to(outside / name)
    status = read_run_status(run)
    assert status.scheduler is None and status.summary is None
    assert status.state is not RunState.RUNNING and "SECRET" not in repr(status)
    assert "scheduler.json is a symlink that leaves the run dir" in (status.error or "")
    assert "summary.json is a symlink that leaves the run dir" in (status.error or "")


def test_read_run_status_returns_parsed_files(tmp_path: Path) -> None:
    run = _make_run(tmp_path, scheduler=_sched(state="queued"), summary_status=None)
    status = read_run_status(run)
    assert status == RunStatus(RunState.QUEUED, None, _sched(state="queued"), None)


@pytest.mark.parametrize("count", [1, 40])
def test_sync_files_skips_gone_files_and_raises_a_failed_fsync(tmp_path: Path,
                                                               count: int) -> None:
    files = []
    for i in range(count):
        path = tmp_path / f"ep{i:04d}.json"
        write_json_atomic(path, {"i": i}, durable=False)
        files.append(path)
    sync_files([*files, tmp_path / "gone.json"])  # one by one, or from threads
    # fsync of a /proc file fails (EINVAL): the error reaches the caller, whose summary
    # must then not claim the rows durable.
    with pytest.raises(OSError):
        sync_files([*files, Path("/proc/self/stat")])
