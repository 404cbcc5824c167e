"""SlurmExecutor: the run's K workers as job steps of its Slurm allocation (docs/slurm.md).

Dealing, retries, cancel and the hung-step watch are the dealing core's
(:class:`~evaltui.engine.executor.dealing.SlotExecutor`), as for the local pool; this is
its slot side. The run process is inside the allocation (``SLURM_JOB_ID`` set: the batch
step of ``evaltui eval --executor slurm``'s job, or any shell of an allocation); each slot
is one ``srun --exact -N1 -n1`` job step running
:mod:`~evaltui.engine.executor.slurm.step`, which dials this process back over the
authenticated channel (TCP on :func:`listen_host`; the secret written to srun's stdin)
and runs the shared episode loop (:mod:`~evaltui.engine.executor.workerloop`) on it. The
workers write their episodes into the run dir themselves: it must be on a filesystem the
nodes share. An episode may be dealt ahead (it waits in the channel), as locally.

A worker is lost when its channel closes before the slot stopped it; its death is
reported once its srun has ended too (up to :data:`SRUN_END_WAIT_SEC`), so that srun's
``Node failure`` can say the node left: such an episode gets :data:`NODE_LOSS_RETRIES`
more tries. Kill: ``scancel --signal=KILL JOB.STEP``; cancel: ``--signal=TERM``, which
the worker turns into ``cancelled`` at the next step.

The shared nodesets' hosts (on this node, on TCP) are watched on the same wait, as the
local pool watches them (:mod:`~evaltui.engine.executor.hostwatch`): a dead one is
restarted at its URL, or, a replica with others up, left lost.
"""

from __future__ import annotations

import os
import pickle
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from multiprocessing.connection import Connection, wait
from typing import Any, Unpack

from evaltui.engine.executor.dealing import DealingOptions, SlotExecutor
from evaltui.engine.executor.errors import ExecutorError
from evaltui.engine.executor.hostwatch import HostLost, check_host, host_conns
from evaltui.engine.executor.slots import Died, SlotEvent, StartFailed
from evaltui.engine.executor.slurm.stepslot import SrunStep, StepSlot
from evaltui.engine.executor.workerchannel import decode, send
from evaltui.engine.executor.workerloop import WorkerConfig
from evaltui.engine.hosting.channel import listen, new_secret, server_handshake
from evaltui.engine.hosting.hostprocess import HostProcess

NODE_LOSS_RETRIES = 3
"""Retries of an episode whose node left mid-episode, on top of ``max_episode_retries``."""
SRUN_END_WAIT_SEC = 20.0
"""After a worker's channel closed, how long its srun may take to end (a lost node's srun
ends 8-12 s later, saying so) before the death is reported anyway."""
LISTEN_HOST_ENV = "EVALTUI_SLURM_LISTEN_HOST"
"""The address the workers dial back to; default: what this node's hostname resolves to."""
STEP_MODULE = "evaltui.engine.executor.slurm.step"


def listen_host() -> str:
    """Where this process listens for its workers: ``$EVALTUI_SLURM_LISTEN_HOST``, else the
    address of this node's own name (the nodes of a cluster reach each other by it)."""
    given = os.environ.get(LISTEN_HOST_ENV)
    if given:
        return given
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def in_allocation() -> str:
    """The job id of the allocation this process is in; ExecutorError if none."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        raise ExecutorError("eval.executor slurm: this run is not inside a Slurm allocation "
                            "(SLURM_JOB_ID is not set): start it with `evaltui eval "
                            "--executor slurm` on a login node, or inside sbatch/salloc")
    return job


class SlurmExecutor(SlotExecutor[StepSlot]):
    """K worker steps of the allocation ``SLURM_JOB_ID``; see the module docstring."""

    deal_ahead = True
    node_loss_retries = NODE_LOSS_RETRIES

    def __init__(self, make_config: Callable[[int], WorkerConfig], worker_count: int, *,
                 cpus_per_worker: int = 1, mem_per_worker_mb: int | None = None,
                 hosts: Sequence[HostProcess] = (), host_lost: HostLost | None = None,
                 **dealing: Unpack[DealingOptions]) -> None:
        super().__init__([StepSlot(i) for i in range(worker_count)], **dealing)
        self.make_config = make_config
        self.hosts, self.host_lost = list(hosts), host_lost
        self.job_id = in_allocation()
        self.cpus_per_worker, self.mem_per_worker_mb = cpus_per_worker, mem_per_worker_mb
        self._secret = new_secret()
        self._hellos: queue.Queue[tuple[Connection, tuple[Any, ...]]] = queue.Queue()
        self._retiring: list[SrunStep] = []
        self._closing = False
        self.url = ""

    # ---- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> SlurmExecutor:
        self._listener, self.url = listen(f"evaltui+tcp://{listen_host()}:0")
        self._wake_r, self._wake_w = os.pipe()
        threading.Thread(target=self._accept, daemon=True, name="slurm-accept").start()
        try:
            for slot in self.slots:
                self.start_worker(slot)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, grace_sec: float = 2.0) -> None:
        """Stop every worker (``stop``, then scancel of its step, then SIGKILL of srun)."""
        steps = [s.step for s in self.slots if s.step is not None] + self._retiring
        for step in steps:
            send(step.conn, "stop")
        deadline = time.monotonic() + grace_sec
        for step in steps:
            self._end(step, None, max(deadline - time.monotonic(), 0.01))
        for slot in self.slots:
            slot.step = None
        self._retiring.clear()
        self._closing = True
        host, port = self._listener.address
        # Wake the accepting thread, which then sees _closing (an OSError: already closed
        # or never listening, nothing waits to be woken).
        with suppress(OSError):
            socket.create_connection((host, port), timeout=1).close()
        self._listener.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    # ---- the slot interface ----------------------------------------------------------------
    def start_worker(self, slot: StepSlot) -> None:
        slot.starts += 1
        argv = ["srun", "--exact", "-N1", "-n1", f"--cpus-per-task={self.cpus_per_worker}",
                f"--job-name=evaltui-worker{slot.worker_id}", "--kill-on-bad-exit=1",
                # a step takes all the job's gres by default: the first worker would hold
                # the GPUs (the shared hosts' on the batch step) and the others wait
                "--gres=none"]
        if self.mem_per_worker_mb is not None:
            argv.append(f"--mem={self.mem_per_worker_mb}M")
        elif os.environ.get("SLURM_MEM_PER_CPU"):
            argv.append(f"--mem-per-cpu={os.environ['SLURM_MEM_PER_CPU']}")
        argv += [sys.executable, "-m", STEP_MODULE, self.url, str(slot.worker_id),
                 str(slot.starts)]
        env = {**os.environ, "SLURM_JOB_ID": self.job_id}
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=env, start_new_session=True)
        except OSError as exc:
            raise ExecutorError(f"cannot start a worker step: {exc}") from exc
        step = SrunStep(proc, slot.starts)
        step.relay(f"evaltui: worker {slot.worker_id} srun")
        assert proc.stdin is not None
        # srun hands its stdin to the task: the secret never is in argv or environ (an
        # OSError: srun already ended, reported as a start failure).
        with suppress(OSError):
            proc.stdin.write(self._secret.hex().encode() + b"\n")
            proc.stdin.close()
        slot.step, slot.node = step, None

    def send_episode(self, slot: StepSlot, index: int, attempt: int) -> None:
        assert slot.step is not None
        send(slot.step.conn, "episode", index)

    def wait_events(self, timeout: float, cancelling: bool) -> list[SlotEvent]:
        self._reap_retired()
        watched: dict[Any, StepSlot] = {s.step.conn: s for s in self.slots
                                        if s.step is not None and s.step.conn is not None}
        hosts = host_conns(self.hosts) if not cancelling else {}
        events: list[SlotEvent] = []
        for ready in wait([*watched, *hosts, self._wake_r], timeout=timeout):
            if ready == self._wake_r:
                os.read(self._wake_r, 4096)
            elif ready in hosts:
                check_host(self.hosts, hosts[ready], self.host_lost)
            else:
                events.extend(self._read(watched[ready]))
        while True:
            try:
                conn, hello = self._hellos.get_nowait()
            except queue.Empty:
                break
            self._on_hello(conn, hello)
        events.extend(self._ended())
        return events

    def kill_worker(self, slot: StepSlot) -> str:
        step = slot.step
        assert step is not None
        slot.step = None
        self._end(step, "KILL", 5.0)
        return str(step.pid)

    def cancel_worker(self, slot: StepSlot) -> None:
        step = slot.step
        if step is None:
            return
        if slot.index is None or step.step_id is None:
            send(step.conn, "stop")
        else:
            self._scancel(step, "TERM")

    def retire_worker(self, slot: StepSlot) -> None:
        """The worker starts nothing after an ``error``: told to stop, reaped once its srun
        has ended, while the slot gets a fresh one."""
        if slot.step is not None:
            send(slot.step.conn, "stop")
            self._retiring.append(slot.step)
            slot.step = None

    # ---- the channel -----------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closing:
            try:
                conn = self._listener.accept()
            except OSError:
                return
            if self._closing:
                conn.close()
                return
            threading.Thread(target=self._greet, args=(conn,), daemon=True).start()

    def _greet(self, conn: Connection) -> None:
        """Authenticate a dialling worker and read its hello (off the dealing thread: one
        silent peer must not stall the others)."""
        try:
            server_handshake(conn, self._secret)
            if not conn.poll(10.0):
                raise TimeoutError("no hello")
            hello = conn.recv()
        except Exception:
            conn.close()
            return
        self._hellos.put((conn, hello))
        with suppress(OSError):  # closing
            os.write(self._wake_w, b"h")

    def _on_hello(self, conn: Connection, hello: tuple[Any, ...]) -> None:
        _, worker_id, start, pid, node, step_id = hello
        slot = self.slots[worker_id] if 0 <= worker_id < len(self.slots) else None
        step = slot.step if slot is not None else None
        if step is None or step.start != start or step.conn is not None:
            send(conn, "bye")  # a step the slot has given up on
            conn.close()
            return
        assert slot is not None
        step.conn, step.pid, step.step_id, slot.node = conn, pid, step_id, node
        print(f"evaltui: worker {worker_id} is step {self.job_id}.{step_id}, pid {pid} on "
              f"node {node}", file=sys.stderr, flush=True)
        config = self.make_config(worker_id)
        send(conn, "config", config.checked.spec.active_workspace_dir,
             pickle.dumps(config))

    def _read(self, slot: StepSlot) -> list[SlotEvent]:
        """One message of the slot's worker as the core's events (a closed channel: its
        death, reported by :meth:`_ended` once srun has ended too)."""
        step = slot.step
        assert step is not None and step.conn is not None
        try:
            message = step.conn.recv()
        except (EOFError, OSError):
            step.close_conn()
            step.lost_at = time.monotonic()
            return []
        event = decode(slot, message)
        if isinstance(event, StartFailed):
            slot.step = None
            self._end(step, None, 5.0)
        return [event] if event is not None else []

    def _ended(self) -> list[SlotEvent]:
        """Deaths: steps whose channel closed (once srun ended, or waited for long enough),
        whose srun ended with the channel still open, or ended before the worker dialled."""
        now = time.monotonic()
        events: list[SlotEvent] = []
        for slot in self.slots:
            step = slot.step
            if step is None:
                continue
            ended = step.ended()
            if step.conn is not None:
                if not ended or step.conn.poll(0):
                    continue  # alive, or its last words (or EOF) not read yet
                step.close_conn()
            elif step.lost_at is None and step.pid is None:
                if not ended:
                    continue  # still starting
                slot.step = None
                self._end(step, None, 1.0)
                events.append(StartFailed(
                    slot, f"worker step {slot.worker_id} ended before its worker connected "
                          f"({step.describe_end()})", node_lost=step.node_failed()))
                continue
            elif not ended and now - (step.lost_at or now) < SRUN_END_WAIT_SEC:
                continue
            slot.step = None
            self._end(step, None, 1.0)
            where = f", pid {step.pid} on node {slot.node}, step {self.job_id}.{step.step_id}"
            events.append(Died(slot, step.describe_end(), where, node_lost=step.node_failed()))
        return events

    # ---- steps -----------------------------------------------------------------------------
    def _scancel(self, step: SrunStep, signal: str | None) -> None:
        if step.step_id is None:
            return
        argv = ["scancel", *([f"--signal={signal}"] if signal else []),
                f"{self.job_id}.{step.step_id}"]
        with suppress(OSError, subprocess.TimeoutExpired):  # srun is killed below in any case
            subprocess.run(argv, capture_output=True, timeout=15, stdin=subprocess.DEVNULL)

    def _end(self, step: SrunStep, signal: str | None, wait_sec: float) -> None:
        """End the step (``signal`` first, if given), wait up to ``wait_sec`` for srun, then
        scancel the step and kill srun; its channel is closed."""
        if signal is not None:
            self._scancel(step, signal)
        try:
            step.proc.wait(wait_sec)
        except subprocess.TimeoutExpired:
            if step.step_id is not None:  # else no step yet (srun waits to create it)
                self._scancel(step, None if signal is None else "KILL")
                with suppress(subprocess.TimeoutExpired):  # still running: killed just below
                    step.proc.wait(5.0)
            if step.proc.poll() is None:
                step.proc.kill()
                step.proc.wait(5.0)
        step.close_conn()

    def _reap_retired(self) -> None:
        still = []
        for step in self._retiring:
            if step.ended():
                step.close_conn()
            else:
                still.append(step)
        self._retiring = still
