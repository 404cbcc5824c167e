"""``evaltui run PROFILE -- CMD``: run a command once the machine has room for it.

1. The profile (profiles.yaml) says what CMD needs: VRAM, an exclusive GPU, a priority.
2. A backend is found or started on the port pool (evaltui.wrapper.backends).
3. An admit entry is queued there; the wrapper prints why it waits until admitted.
4. CMD runs with ``BACKEND_URL`` (and its GPU's ``CUDA_VISIBLE_DEVICES``) exported, in its
   own session, so its GPU usage counts against its reservation (``bind``); it dies
   with the wrapper (PR_SET_PDEATHSIG), so a SIGKILLed wrapper leaves nothing holding
   memory, and the ledger purges the reservation of the dead holder.
5. When CMD exits the entry is released and CMD's exit code is the wrapper's. An entry
   released by someone else (``evaltui cancel admit:ID``) stops CMD as SIGTERM would. Ctrl-C,
   SIGTERM or SIGHUP while waiting leave the queue; while CMD runs they are forwarded to
   it (it has no controlling terminal of its own), and SIGKILL follows after a grace
   period. What CMD leaves behind in its process group is ended with it.

Exit codes besides CMD's own: 2 bad command line or profiles file, 125 no backend or
admission failed, 126 CMD cannot be executed, 127 CMD not found, 128+N a signal while
waiting.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from evaltui.api.client import URL_ENV, ApiClient, ApiError, BackendUnavailable, NotFound
from evaltui.api.models import Admit
from evaltui.commands.console import error
from evaltui.contract.pidref import PidRef
from evaltui.contract.states import AdmitState
from evaltui.procs.groups import signal_group
from evaltui.rundir.layout import outputs_root
from evaltui.wrapper.backends import BackendLease, BackendStartError, acquire_backend
from evaltui.wrapper.ports import parse_pool, port_pool
from evaltui.wrapper.profiles import ProfileError, ResolvedProfile, resolve_profile

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
KILL_GRACE_SEC = 10.0
RELEASE_LOOK_SEC = 1.0
"""How often a running command's wrapper looks whether its entry was cancelled."""
REQUEUE_LIMIT = 3
EXIT_FAILED = 125
ADMIT_ID_ENV = "EVALTUI_ADMIT_ID"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run",
                       description="Wait until the machine has room for PROFILE (profiles.yaml: "
                       "marginal_vram_mb, exclusive_gpu, priority, cpus; an unknown profile "
                       "takes a whole GPU), then run CMD with BACKEND_URL exported, and "
                       "release its place when CMD exits. Exits with CMD's exit code.",
                       usage="evaltui run [options] PROFILE -- CMD [ARG ...]")
    p.add_argument("--profiles", type=Path, help="profiles file (default ./profiles.yaml, "
                   "then the state dir's)")
    p.add_argument("--outputs", help="outputs root of a backend started here")
    p.add_argument("--ports", help="backend port pool, LO-HI or a comma list (default "
                   "$EVALTUI_PORT_POOL or 8765-8769)")
    p.add_argument("--allow-privileged-ports", action="store_true",
                   help="let the port pool hold ports below 1024")
    p.add_argument("--quiet", "-q", action="store_true", help="print only errors")
    p.add_argument("profile")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD")
    p.set_defaults(func=run)


class Interrupted(BaseException):
    """A signal arrived while waiting for admission (BaseException: it must get through
    any ``except Exception`` on its way up, like KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def run(args: argparse.Namespace) -> int:
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else list(args.cmd)
    if not cmd:
        return error("no command (usage: evaltui run PROFILE -- CMD ...)")
    try:
        profile = resolve_profile(args.profile, args.profiles)
        # Checked here, before anything starts: a bad pool is a one-line error, exit 2.
        privileged = args.allow_privileged_ports
        pool = parse_pool(args.ports, allow_privileged=privileged, source="--ports") \
            if args.ports else port_pool(allow_privileged=privileged)
    except (ProfileError, ValueError) as exc:  # PortPoolError is a ValueError
        return error(str(exc))
    wrapper = Wrapper(cmd, profile, outputs_root(args.outputs), pool, quiet=args.quiet)
    return wrapper.run()


class Wrapper:
    """One ``evaltui run``: its backend lease, admit entry, command and signals."""

    NAME = "evaltui run"
    """What its own lines on stderr start with."""

    def __init__(self, cmd: list[str], profile: ResolvedProfile, outputs: Path,
                 pool: list[int], *, quiet: bool = False) -> None:
        self.cmd = cmd
        self.profile = profile
        self.outputs = outputs
        self.pool = pool
        self.quiet = quiet
        self.me = PidRef.current()
        self.lease: BackendLease | None = None
        self.client: ApiClient | None = None
        self.entry: Admit | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._kill_at: float | None = None
        self._closing = False
        self.kind = "run"
        """The entry's kind: ``serve`` for ``evaltui serve-policy`` (commands/servequeue.py)."""
        self.ram_mb: int | None = None
        """Host RAM to reserve (``serve-policy``'s calibrated or declared need); None: none."""

    def say(self, message: str) -> None:
        if not self.quiet:
            # The wrapper's own lines, among the command's: named, not "note:".
            print(f"{self.NAME}: {message}", file=sys.stderr, flush=True)

    def run(self) -> int:
        previous = {sig: signal.signal(sig, self._on_signal) for sig in FORWARDED}
        try:
            self.say(f"profile {self.profile.name!r} ({_describe(self.profile)}; "
                     f"{self.profile.source})")
            try:
                return self._run_command(self._admitted())
            except Interrupted as stop:
                self.say(f"interrupted ({signal.Signals(stop.signum).name}) before the command "
                         "started; left the queue")
                if self.proc is not None:
                    _end_leftovers(self.proc.pid)
                return 128 + stop.signum
            except (ApiError, BackendStartError) as exc:
                return error(str(exc), EXIT_FAILED)
        finally:
            self._closing = True  # a late signal must not interrupt the release
            self._release()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._disconnect()

    # ---- admission ----------------------------------------------------------------------
    def _admitted(self) -> Admit:
        """Queue the entry and wait until it is admitted (re-queue if the backend goes)."""
        for attempt in range(REQUEUE_LIMIT + 1):
            self._connect()
            try:
                return self._wait_admission()
            except (BackendUnavailable, NotFound) as exc:
                if attempt == REQUEUE_LIMIT:
                    raise
                self.say(f"lost the backend ({exc}); reconnecting")
        raise AssertionError("unreachable")

    def _connect(self) -> None:
        self._disconnect()
        self.lease = acquire_backend(self.outputs, self.pool, self.say)
        self.client = ApiClient(self.lease.url)

    def _disconnect(self) -> None:
        """Close the client and let the backend lease go."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.lease is not None:
            self.lease.close()
            self.lease = None

    def _wait_admission(self) -> Admit:
        assert self.client is not None and self.lease is not None
        entry = self._kept_entry()
        if entry is None:
            p = self.profile.profile
            entry = self.client.create_admit(
                self.profile.name, self.me.pid, self.me.create_time,
                marginal_vram_mb=p.marginal_vram_mb, exclusive_gpu=p.exclusive_gpu,
                priority=p.priority, command=shlex.join(self.cmd), cpus=p.cpus,
                kind=self.kind, ram_mb=self.ram_mb)
            self.say(f"queued as {entry.admit_id} on {self.lease.url}")
        self.entry = entry
        said = None
        while entry.state is AdmitState.WAITING:
            if entry.waiting_reason and entry.waiting_reason != said:
                said = entry.waiting_reason
                self.say(f"waiting: {said}")
            entry = self.client.get_admit(entry.admit_id, wait=10.0, seen=entry.version)
        self.entry = entry
        if entry.state is not AdmitState.ADMITTED:
            raise ApiError(f"admit entry {entry.admit_id} was released before it was "
                           f"admitted: {entry.release_reason}")
        where = f"GPU{entry.gpu}" if entry.gpu is not None else "host only (no GPU measured)"
        held = f", {entry.reserved_mb} MiB reserved" if entry.reserved_mb else ""
        self.say(f"admitted on {where}{held}; running {shlex.join(self.cmd)}")
        return entry

    def _kept_entry(self) -> Admit | None:
        """The entry queued with a backend that went away, if the one serving now took it
        over (a restarted backend restores waiting entries, in their order)."""
        assert self.client is not None and self.lease is not None
        if self.entry is None:
            return None
        try:
            entry = self.client.get_admit(self.entry.admit_id)
        except NotFound:
            return None
        if entry.state is AdmitState.RELEASED:
            return None
        self.say(f"{entry.admit_id} kept its place on {self.lease.url}")
        return entry

    # ---- the command --------------------------------------------------------------------
    def _run_command(self, entry: Admit) -> int:
        assert self.client is not None and self.lease is not None
        env = {**os.environ, **entry.env, URL_ENV: self.lease.url, ADMIT_ID_ENV: entry.admit_id}
        try:
            self.proc = subprocess.Popen(self.cmd, env=env, start_new_session=True,
                                         preexec_fn=_die_with_parent(os.getpid()))
        except OSError as exc:
            # 127/126: the shell's codes for a command not found / not runnable
            return error(f"cannot run {self.cmd[0]!r}: {exc.strerror or exc}",
                         127 if isinstance(exc, FileNotFoundError) else 126)
        try:
            ref = PidRef.of(self.proc.pid)
            self.client.bind_admit(entry.admit_id, ref.pid, ref.create_time)
        except Exception as exc:  # the reservation stays with this wrapper: still safe
            if self.proc.poll() is None:
                self.say(f"could not hand the reservation to the command ({exc}); it stays "
                         "with this wrapper")
        code = self._wait_command(self.proc)
        _end_leftovers(self.proc.pid)
        return code

    def _wait_command(self, proc: subprocess.Popen[bytes]) -> int:
        next_look = time.monotonic() + RELEASE_LOOK_SEC
        while True:
            try:
                code = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= next_look:
                    next_look = time.monotonic() + RELEASE_LOOK_SEC
                    self._stop_if_released(proc)
                if self._kill_at is not None and time.monotonic() > self._kill_at:
                    self.say(f"command still running {KILL_GRACE_SEC:.0f} s after the signal; "
                             "SIGKILL")
                    signal_group(proc.pid, signal.SIGKILL)
                    self._kill_at = None
        return code if code >= 0 else 128 - code

    def _stop_if_released(self, proc: subprocess.Popen[bytes]) -> None:
        """``evaltui cancel admit:ID`` released the entry: the command has no reservation
        any more, so it is stopped as if the wrapper had been sent SIGTERM."""
        if self.client is None or self.entry is None or self._kill_at is not None:
            return
        try:
            entry = self.client.get_admit(self.entry.admit_id)
        except (ApiError, NotFound):
            return  # the backend is away: the reservation is still the ledger's
        if entry.state is AdmitState.RELEASED and proc.poll() is None:
            self.say(f"{entry.admit_id} was released from outside (evaltui cancel); stopping "
                     "the command")
            signal_group(proc.pid, signal.SIGTERM)
            self._kill_at = time.monotonic() + KILL_GRACE_SEC

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        proc = self.proc
        if self._closing:
            return
        if proc is None:
            raise Interrupted(signum)
        if proc.poll() is None:
            signal_group(proc.pid, signum)
            if self._kill_at is None:
                self._kill_at = time.monotonic() + KILL_GRACE_SEC

    def _release(self) -> None:
        if self.client is None or self.entry is None:
            return
        try:
            self.client.release_admit(self.entry.admit_id)
        except ApiError:
            pass  # the backend is gone; the ledger purges the entry of a dead holder anyway


def _describe(profile: ResolvedProfile) -> str:
    p = profile.profile
    if p.marginal_vram_mb is None:
        need = "a whole GPU" if p.exclusive_gpu else "no VRAM"
    else:
        need = f"{p.marginal_vram_mb} MiB" + (", exclusive GPU" if p.exclusive_gpu else "")
    return f"{need}, priority {p.priority}"


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """A preexec_fn arming PR_SET_PDEATHSIG (SIGKILL) in the command (Linux only).

    libc is loaded here, in the parent: the child between fork and exec must not load
    libraries.
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def arm() -> None:
        prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the wrapper died before the signal was armed
            os._exit(1)

    return arm


def _end_leftovers(pgid: int, grace_sec: float = 5.0) -> None:
    """SIGTERM what CMD left behind in its process group (background jobs would hold GPU
    memory nobody reserved any more), SIGKILL after a grace period."""
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_sec
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)
    signal_group(pgid, signal.SIGKILL)
