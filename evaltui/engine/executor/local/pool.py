"""EnvWorkerPool: the local executor -- K worker subprocesses on this machine (DESIGN §1, §5).

Dealing, retries, cancel and the hung-step watch are the dealing core's
(:class:`~evaltui.engine.executor.dealing.SlotExecutor`); this is its slot side. A slot's
worker is a fork of a :class:`~evaltui.engine.executor.local.zygote.WorkerZygote` (given,
or started by the pool), so K of them start in milliseconds; it is sent episodes over
its pipe and may hold one dealt ahead there (``deal_ahead``). The pool runs from one
thread -- the thread that started the zygote, since the zygote's PR_SET_PDEATHSIG is
tied to it.

Besides its workers the pool watches the run's nodeset hosts (a dead host is restarted
at its URL, unless ``host_lost`` says it was a replica the run goes on without) and the
zygote (a dead zygote is replaced), on the same wait.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait
from typing import Any, Unpack

from evaltui.engine.executor.dealing import DealingOptions, SlotExecutor
from evaltui.engine.executor.errors import NodesetBuildError
from evaltui.engine.executor.hostwatch import HostLost, check_host, host_conns
from evaltui.engine.executor.local.slot import WorkerSlot
from evaltui.engine.executor.local.zygote import ForkedChild, WorkerZygote, ZygoteError
from evaltui.engine.executor.slots import Died, Ready, SlotEvent, StartFailed
from evaltui.engine.executor.workerchannel import decode, send
from evaltui.engine.executor.workerloop import WorkerConfig
from evaltui.engine.hosting.hostprocess import HostProcess
from evaltui.engine.processes.oomkills import OOM_KILLED, OomKills


class EnvWorkerPool(SlotExecutor[WorkerSlot]):
    """K worker slots, each one subprocess at a time; see the module docstring."""

    deal_ahead = True

    def __init__(self, make_config: Callable[[int], WorkerConfig], worker_count: int, *,
                 hosts: Sequence[HostProcess] = (), zygote: WorkerZygote | None = None,
                 host_lost: HostLost | None = None, **dealing: Unpack[DealingOptions]) -> None:
        if worker_count < 1:
            raise ValueError(f"worker_count must be >= 1, got {worker_count}")
        super().__init__([WorkerSlot(i) for i in range(worker_count)], **dealing)
        self.make_config = make_config
        self.hosts = list(hosts)
        self.host_lost = host_lost
        """Asked first when a host dies: True means it is a lost replica, not restarted."""
        self._owns_zygote = zygote is None
        self.zygote = zygote or WorkerZygote()
        self.start_times: list[float] = []
        """Seconds from each fork request to that worker's ``ready``."""
        self._retiring: list[ForkedChild] = []
        self._oom = OomKills()  # a SIGKILL of the OOM killer reads as memory, not by hand

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> EnvWorkerPool:
        if self.zygote.child is None and self.zygote.starts == 0:
            self.zygote.start()
        for slot in self.slots:
            self.start_worker(slot)
        return self

    def close(self, grace_sec: float = 2.0) -> None:
        """Stop every worker (``stop`` message, SIGTERM, then SIGKILL) and reap them."""
        children = [s.child for s in self.slots if s.child is not None] + self._retiring
        for child in children:
            send(child.conn, "stop")
        deadline = time.monotonic() + grace_sec
        for child in children:
            child.exit_code(max(deadline - time.monotonic(), 0.01))
            child.end(grace_sec=0.5)
        for slot in self.slots:
            slot.child = None
        self._retiring.clear()
        if self._owns_zygote:
            self.zygote.close()

    def __enter__(self) -> EnvWorkerPool:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the slot interface ----------------------------------------------------------------
    def start_worker(self, slot: WorkerSlot) -> None:
        slot.started_at = time.monotonic()
        try:
            slot.child = self.zygote.fork(self.make_config(slot.worker_id),
                                          name=f"worker{slot.worker_id}")
        except ZygoteError as exc:
            raise NodesetBuildError(f"workers cannot start: {exc}") from exc

    def send_episode(self, slot: WorkerSlot, index: int, attempt: int) -> None:
        assert slot.child is not None
        send(slot.child.conn, "episode", index)

    def wait_events(self, timeout: float, cancelling: bool) -> list[SlotEvent]:
        self._reap_retired()
        watched: dict[Any, Any] = {s.child.conn: s for s in self.slots if s.child}
        if not cancelling:
            watched.update(host_conns(self.hosts))
        if self.zygote.child is not None:
            watched[self.zygote.child.conn] = self.zygote
        events: list[SlotEvent] = []
        for conn in wait(list(watched), timeout=timeout):
            owner = watched[conn]
            if isinstance(owner, HostProcess):
                check_host(self.hosts, owner, self.host_lost)
            elif owner is self.zygote:
                self.zygote.pump(0)  # exit reports; or its death
            else:
                events.extend(self._read(owner))
        return events

    def kill_worker(self, slot: WorkerSlot) -> str:
        return str(slot.kill().pid)

    def cancel_worker(self, slot: WorkerSlot) -> None:
        if slot.child is None:
            return
        if slot.index is None:
            send(slot.child.conn, "stop")
        # The group SIGTERM may not have reached it (the run alone was signalled).
        slot.child.send_signal(signal.SIGTERM)

    def retire_worker(self, slot: WorkerSlot) -> None:
        """The worker starts nothing after an ``error`` (worker.py): it is told to stop
        and reaped once it has, while the slot gets a fresh one."""
        if slot.child is not None:
            send(slot.child.conn, "stop")
            self._retiring.append(slot.child)
            slot.child = None

    # ---- messages --------------------------------------------------------------------------
    def _on_message(self, slot: WorkerSlot) -> None:
        """Read and apply one message (or the death) of a slot's worker."""
        for event in self._read(slot):
            self._on_event(event)

    def _read(self, slot: WorkerSlot) -> list[SlotEvent]:
        """One message of the slot's worker (or its death) as the core's events."""
        child = slot.child
        assert child is not None
        try:
            message = child.conn.recv()
        except (EOFError, OSError):
            how = child.describe_exit()
            if how.startswith("signal 9") and self._oom.since_last():
                how = f"signal 9, {OOM_KILLED}"  # not by hand: memory
            child.end(grace_sec=0.5)
            slot.child = None
            return [Died(slot, how, f", pid {child.pid}")]
        event = decode(slot, message)
        if isinstance(event, Ready):
            self.start_times.append(time.monotonic() - slot.started_at)
        elif isinstance(event, StartFailed):
            child.end(grace_sec=0.5)
            slot.child = None
        return [event] if event is not None else []

    def _reap_retired(self) -> None:
        still = []
        for child in self._retiring:
            if child.exit_code() is None:
                still.append(child)
            else:
                child.end()
        self._retiring = still
