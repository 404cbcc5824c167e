"""Run-dir layout, atomic JSON files, log.jsonl reading and run-state derivation.

This is the one contract the backend, the run subprocess and every UI share (DESIGN §2,
§3): it must stay importable without Textual or FastAPI.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import psutil

# The file names live with the records (evaltui.records); readers import them from here too.
from evaltui.recordparse import parse_lenient
from evaltui.records import (
    DONE_FILENAME,
    EPISODES_DIRNAME,
    RUNS_DIRNAME,
    SCHEDULER_FILENAME,
    SUMMARY_FILENAME,
    SchedulerRecord,
    SummaryHeader,
)
from evaltui.safeopen import LeavesRoot, NotAnObject, Root, read_object_inside
from evaltui.settings import settings
from evaltui.states import RunExit, RunState, SummaryStatus

RUN_ID_RE = re.compile(r"[0-9]{8}_[0-9]{6}(?:_(?:[2-9]|[1-9][0-9]+))?")
"""``YYYYmmdd_HHMMSS`` with an optional collision suffix ``_2``, ``_3``, … (use fullmatch)."""

_EPISODE_DIR_RE = re.compile(r"ep([0-9]{4,})")
_JSON_OPTS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
_LOG_CHUNK = 1 << 20
_CORRUPT_RAW_CHARS = 200
_CREATE_TIME_TOLERANCE_SEC = 0.5


# --- locations ---------------------------------------------------------------------------


def now_iso() -> str:
    """Now as the run-dir records write times: ISO 8601, local time, milliseconds."""
    return datetime.now().astimezone().isoformat(timespec="milliseconds")


def outputs_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The outputs root: ``explicit``, else ``$EVALTUI_OUTPUTS``, else ``./outputs``."""
    raw = explicit if explicit is not None else (settings().outputs or "outputs")
    return Path(raw).expanduser().resolve()


def runs_root(outputs: Path) -> Path:
    """``outputs/eval_runs``."""
    return Path(outputs) / RUNS_DIRNAME


class StateDirError(OSError):
    """The state dir cannot be made or used; the message is one line for the user."""


def state_dir() -> Path:
    """Per-user state dir (ledger, token, calibration), created with mode 0700 (raises
    StateDirError)."""
    current = settings()
    explicit, xdg = current.state_dir, current.xdg_state_home
    if explicit:
        path = Path(explicit).expanduser()
        source = "EVALTUI_STATE_DIR"
    elif xdg and os.path.isabs(xdg):  # the XDG spec says to ignore relative values
        path = Path(xdg) / "evaltui"
        source = "XDG_STATE_HOME"
    else:
        path = Path.home() / ".local" / "state" / "evaltui"
        source = "the default"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = path.resolve()
    except OSError as exc:
        raise StateDirError(exc.errno, f"cannot make the state dir {path} (from {source}): "
                            f"{exc.strerror or exc}") from None
    if path not in _private_dirs:
        make_private(path)
        _private_dirs.add(path)
    return path


PRIVATE_MODE = 0o600
"""Mode of every file in the state dir (DESIGN §11): the token, the ledger, pid files…"""
_private_dirs: set[Path] = set()


def make_private(path: Path) -> None:
    """Force ``path`` to 0700 and what is under it to 0700 (dirs) / 0600 (files).

    Run once per process per state dir: a dir made by an older version (or by hand, with
    the usual umask) is 0755 with 0644 files. Only what this user owns is changed, and a
    symlink is never followed.
    """
    uid = os.getuid()
    top = os.stat(path)
    if top.st_uid == uid and stat.S_IMODE(top.st_mode) != 0o700:
        os.chmod(path, 0o700)
    for dirpath, dirnames, filenames in os.walk(path):
        for name, want in [(d, 0o700) for d in dirnames] + [(f, PRIVATE_MODE) for f in filenames]:
            full = os.path.join(dirpath, name)
            try:
                st = os.lstat(full)
                if st.st_uid == uid and not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o077:
                    os.chmod(full, want if stat.S_ISDIR(st.st_mode) else
                             stat.S_IMODE(st.st_mode) & ~0o077)
            except OSError:
                continue  # gone in between, or not ours to change


def is_run_id(name: str) -> bool:
    """True if ``name`` is a well-formed run_id (so it is safe to join under eval_runs/)."""
    return isinstance(name, str) and RUN_ID_RE.fullmatch(name) is not None


def allocate_run_dir(outputs: Path, now: datetime | None = None) -> Path:
    """Create and return a fresh ``eval_runs/{run_id}`` dir.

    ``mkdir`` either creates the dir or fails, so two processes allocating in the same
    second get different suffixes without any lock.
    """
    stamp = now or datetime.now()
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone()  # run ids are local time
    base = stamp.strftime("%Y%m%d_%H%M%S")
    root = runs_root(outputs)
    root.mkdir(parents=True, exist_ok=True)
    suffix = 1
    while True:
        run_dir = root / (base if suffix == 1 else f"{base}_{suffix}")
        try:
            os.mkdir(run_dir)
        except FileExistsError:
            suffix += 1
            continue
        return run_dir


def episode_dir(run_dir: Path, index: int) -> Path:
    """``run_dir/episodes/ep{index:04d}``."""
    if index < 0:
        raise ValueError(f"episode index must be >= 0, got {index}")
    return Path(run_dir) / EPISODES_DIRNAME / f"ep{index:04d}"


def episode_index_from_dirname(name: str) -> int | None:
    """The index of an ``ep{NNNN}`` dir name, or None (also for non-canonical ``ep00012``)."""
    m = _EPISODE_DIR_RE.fullmatch(name)
    if m is None:
        return None
    index = int(m.group(1))
    # Only the canonical spelling, so that two dirs never claim the same index.
    return index if f"ep{index:04d}" == name else None


# --- atomic files ------------------------------------------------------------------------


def write_json_atomic(path: Path, obj: Any, *, durable: bool = True, mode: int = 0o666,
                      compact: bool = False) -> None:
    """Write ``obj`` as JSON so that a reader sees the old file or the new one, never half.

    The temp file starts with '.' so ``*.json`` globs never pick it up. ``durable=False``
    skips the fsync before the rename: readers are just as safe (the rename is atomic),
    but a power cut may lose the file until the caller syncs it (:func:`sync_files`).
    ``mode`` is the new file's (before the umask): :data:`PRIVATE_MODE` for the state
    dir's files. ``compact`` leaves out the indentation.
    """
    options = _JSON_OPTS & ~orjson.OPT_INDENT_2 if compact else _JSON_OPTS
    data = orjson.dumps(obj, option=options)  # before touching the disk: may raise
    write_bytes_atomic(path, (data,), durable=durable, mode=mode)


def write_bytes_atomic(path: Path, chunks: Iterable[bytes], *, durable: bool = True,
                       mode: int = 0o666) -> None:
    """Write the concatenated ``chunks`` as :func:`write_json_atomic` writes its JSON (a
    reader sees the old file or the new one): a file too big to hold in memory at once,
    such as a long run's final summary.json, is streamed."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            for data in chunks:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


SYNC_THREADS = 8


def sync_files(paths: Iterable[Path]) -> None:
    """fsync files written with ``durable=False`` (gone ones are skipped; another error
    is raised once every file was tried).

    Many files are fsynced from up to :data:`SYNC_THREADS` threads at once: each fsync of
    a small new file forces an ext4 journal commit of its own, and concurrent ones share
    commits (400 episode files: 0.08-0.10 s one by one, 0.035-0.045 s with 8 threads, on
    the development VM). ``syncfs`` would take ~5 ms but also waits for every other
    process's dirty data on the same filesystem (a checkpoint being written next door).
    """
    paths = list(paths)
    if len(paths) <= 2:
        for path in paths:
            _fsync_file(path)
        return
    from concurrent.futures import ThreadPoolExecutor  # 5 ms of imports: the CLI's too

    with ThreadPoolExecutor(min(SYNC_THREADS, len(paths)),
                            thread_name_prefix="fsync") as pool:
        list(pool.map(_fsync_file, paths))  # re-raises a failed fsync


def _fsync_file(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_json(path: Path) -> Any:
    """Parse a JSON file (raises ``orjson.JSONDecodeError``, a ValueError, if invalid)."""
    return orjson.loads(Path(path).read_bytes())


def touch_done(run_dir: Path) -> Path:
    """Create ``_DONE`` durably: it is the run's last word on a clean exit."""
    path = Path(run_dir) / DONE_FILENAME
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o666)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    _fsync_dir(Path(run_dir))  # else a power cut could lose the entry and read as aborted
    return path


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- processes and run state -------------------------------------------------------------


@dataclass(frozen=True)
class PidRef:
    """A process identity that survives PID reuse: pid plus its create time."""

    pid: int
    create_time: float

    @classmethod
    def current(cls) -> PidRef:
        """This process."""
        return cls.of(os.getpid())

    @classmethod
    def of(cls, pid: int) -> PidRef:
        """A live process (raises ``psutil.NoSuchProcess`` if there is none)."""
        return cls(pid, psutil.Process(pid).create_time())

    def alive(self) -> bool:
        """True if this very process still runs (zombies and reused PIDs count as dead)."""
        if self.pid <= 0:
            return False
        try:
            proc = psutil.Process(self.pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return False
            return abs(proc.create_time() - self.create_time) <= _CREATE_TIME_TOLERANCE_SEC
        except psutil.Error:  # gone, or not ours to inspect: either way not our run
            return False


@dataclass(frozen=True)
class RunStatus:
    """What a status read of one run dir found."""

    state: RunState
    summary: dict[str, Any] | None
    scheduler: dict[str, Any] | None
    error: str | None = None
    """Why a file present in the run dir could not be used, for a UI badge."""
    note: str | None = None
    """Why an ``aborted`` run ended ("killed by signal 9", "process vanished")."""
    summary_unreadable: bool = False
    """summary.json exists but could not be read (torn or garbage): rebuild from rows."""


def read_run_status(run_dir: Path) -> RunStatus:
    """Read scheduler.json, summary.json and ``_DONE`` and derive the state (DESIGN §3)."""
    run_dir = Path(run_dir)
    errors: list[str] = []
    root = Root.of(run_dir)  # resolved once for both reads
    scheduler = _read_optional_object(root, SCHEDULER_FILENAME, errors)
    summary = _read_optional_object(root, SUMMARY_FILENAME, errors)
    summary_exists = (run_dir / SUMMARY_FILENAME).exists()
    state = derive_state(scheduler, summary, summary_exists=summary_exists,
                         done=(run_dir / DONE_FILENAME).exists())
    note = abort_note((scheduler or {}).get("exit_code")) if state is RunState.ABORTED else None
    return RunStatus(state, summary, scheduler, "; ".join(errors) or None, note,
                     summary_unreadable=summary_exists and summary is None)


def abort_note(exit_code: Any) -> str:
    """Why a run without ``_DONE`` or a terminal summary ended, from its exit code."""
    if isinstance(exit_code, int) and not isinstance(exit_code, bool):
        if exit_code < 0:
            try:
                name = signal.Signals(-exit_code).name
            except ValueError:
                name = "unknown signal"
            return f"killed by signal {-exit_code} ({name})"
        return f"exited {exit_code} without a terminal summary; see run.log"
    return "process vanished (no _DONE, no terminal summary)"


def derive_run_state(run_dir: Path) -> RunState:
    """The run's state, from its files and a liveness check of its recorded PID."""
    return read_run_status(run_dir).state


def _read_optional_object(run_dir: Root, name: str, errors: list[str]) -> dict[str, Any] | None:
    """A JSON object file of the run dir, or None if absent or unusable (noted in
    ``errors``); a symlink out of the run dir is never followed."""
    try:
        return read_object_inside(run_dir, name)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except LeavesRoot:
        errors.append(f"{name} is a symlink that leaves the run dir; not read")
    except orjson.JSONDecodeError as exc:
        errors.append(f"{name} is not valid JSON: {exc}")
    except NotAnObject:
        errors.append(f"{name} is not a JSON object")
    except OSError as exc:
        errors.append(f"{name} could not be read: {exc}")
    return None


DISK_FULL_NOTE = "disk full: {run_dir} (the run's writes found no room for longer than " \
    "EVALTUI_DISK_FULL_WAIT_SEC); resume it once there is room"


def derive_state(scheduler: Mapping[str, Any] | None, summary: Mapping[str, Any] | None, *,
                 summary_exists: bool, done: bool) -> RunState:
    """The run's state (DESIGN §3) from its scheduler.json and summary.json as read (None:
    absent or unreadable), parsed leniently (:func:`recordparse.parse_lenient`): a field that
    does not fit reads as unset, except that a cancel request is one whatever its time."""
    sched, sched_bad = parse_lenient(SchedulerRecord, scheduler) if scheduler else (None, ())
    header = parse_lenient(SummaryHeader, summary)[0] if summary else None
    status = header.status if header else None
    code = sched.exit_code if sched else None
    cancel = sched is not None and (sched.cancel_requested_at is not None
                                    or "cancel_requested_at" in sched_bad)
    if done:
        if status is not None and status is not SummaryStatus.RUNNING:
            return RunState(status.value)  # done, failed or cancelled: the run's own word
        if summary is None and summary_exists:
            # _DONE is touched last, after the final summary: the run ended cleanly and
            # only its summary is unreadable. Its exit code says how (RunExit).
            if cancel or code == RunExit.CANCELLED:
                return RunState.CANCELLED
            return RunState.FAILED if code == RunExit.FAILED else RunState.DONE
        # _DONE without a terminal summary: judge by the rules below.

    pid = sched.pid if sched else None
    has_pid = pid is not None and pid > 0
    create_time = sched.pid_create_time if sched else None
    if pid is not None and has_pid and create_time is not None:
        if PidRef(pid, create_time).alive():
            return RunState.RUNNING if summary_exists else RunState.STARTING

    # No live process from here on. A cancel request wins over "queued" so that a job
    # cancelled while waiting is never re-enqueued by a restarted backend.
    if cancel:
        return RunState.CANCELLED
    sched_state = sched.state if sched else None
    if sched_state is RunState.QUEUED and not has_pid:
        return RunState.QUEUED
    if status == SummaryStatus.CANCELLED or sched_state is RunState.CANCELLED:
        return RunState.CANCELLED
    # `failed` needs a terminal error written by the run (or by the scheduler, when the
    # run could not even be spawned); a run killed by a signal or dead without a word is
    # `aborted` (DESIGN §3), whatever its exit code.
    if status == SummaryStatus.FAILED or sched_state is RunState.FAILED:
        return RunState.FAILED
    if code == RunExit.DISK_FULL:  # it said why the only way it could
        return RunState.FAILED
    return RunState.ABORTED
