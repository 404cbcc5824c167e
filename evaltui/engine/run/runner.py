"""BatchEvalRunner: scores a graph on the selected episodes and fills the run dir.

It reads ``spec.json``, writes ``graph.json``, starts a host subprocess for each shared
nodeset that ``shared_urls.json`` has no URL for (one per GPU for a nodeset with
``replicas``: :mod:`evaltui.engine.run.replicas`), and deals the episodes to an
executor (:mod:`evaltui.engine.executor.protocol`): by default an
EnvWorkerPool of ``worker_count`` worker subprocesses (one is still a subprocess, so
K = 1 and K > 1 run the same code). Each worker runs whole episodes and writes their
``log.jsonl``/``assets``; this process is the single writer of every ``episode.json``
(as soon as its episode ends) and of ``summary.json`` (through a SummaryWriter), and it
touches ``_DONE`` last.

Hosts started here authenticate clients with a random per-run secret that reaches the
hosts and workers only through their inherited control pipes; their unix sockets live
in a private 0700 temp dir (``evaltui-{run_id}-{key}-*``, removed at the end) and their URLs
are added to ``shared_urls.json``. URLs the backend put there use the per-host secret of
the state dir (:func:`evaltui.engine.hosting.channel.host_secret`).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Any

from evaltui.contract.records import (
    DONE_FILENAME,
    EPISODE_FILENAME,
    GRAPH_FILENAME,
    LOG_FILENAME,
    SHARED_URLS_FILENAME,
    SPEC_FILENAME,
    TRAJECTORY_FILENAME,
)
from evaltui.contract.settings import settings
from evaltui.contract.spec import SpecError, parse_spec
from evaltui.contract.states import RunExit, SummaryStatus
from evaltui.engine.episode.trajrecord import (
    trajectory_json,
    trajectory_record,
)
from evaltui.engine.executor.dealing import DealingOptions
from evaltui.engine.executor.errors import ExecutorError, NodesetBuildError
from evaltui.engine.executor.local.pool import EnvWorkerPool
from evaltui.engine.executor.local.zygote import WorkerZygote
from evaltui.engine.executor.protocol import EpisodeExecutor, EpisodeResult
from evaltui.engine.executor.slurm.executor import SlurmExecutor, listen_host
from evaltui.engine.executor.workerloop import WorkerConfig
from evaltui.engine.graph.datasets import load_episodes
from evaltui.engine.graph.specchecks import CheckedSpec, check_spec
from evaltui.engine.hosting.batching import HOST_MAX_BATCH_SIZE, HOST_MAX_WAIT_MS
from evaltui.engine.hosting.channel import (
    ChannelError,
    SharedEndpoint,
    host_secret,
    new_secret,
    parse_url,
)
from evaltui.engine.hosting.hostprocess import HostConfig, HostProcess, HostStartError
from evaltui.engine.run.allocgpus import allocation_host_env  # a Slurm job's GPUs
from evaltui.engine.run.replicas import RunReplicas
from evaltui.engine.run.runrecords import earlier_rows, episode_row, graph_snapshot, node_list
from evaltui.engine.run.socketdir import SocketDir
from evaltui.engine.run.stoprun import RunStop
from evaltui.engine.run.summary import SummaryWriter
from evaltui.rundir.diskfull import DISK, DiskFull
from evaltui.rundir.jsonfiles import read_json, touch_done, write_json_atomic
from evaltui.rundir.layout import episode_dir


def reset_budget(ev: Any) -> float | None:
    """Seconds an env reset may take (``reset_budget_sec``, else derived from the step's)."""
    if ev.reset_budget_sec is not None:
        return float(ev.reset_budget_sec)
    step = ev.per_step_budget_sec
    return max(60.0, 10.0 * step) if step is not None else None


_EXITS = {SummaryStatus.DONE: RunExit.OK, SummaryStatus.FAILED: RunExit.FAILED,
          SummaryStatus.CANCELLED: RunExit.CANCELLED}
"""The run process's exit code after each final summary status."""


class BatchEvalRunner:
    """Runs one eval from its run dir; ``stop`` (set by SIGTERM) ends it consistently.

    Call ``run`` from a thread that outlives the run: the worker and host subprocesses'
    PR_SET_PDEATHSIG is tied to the thread that spawned them.
    """

    def __init__(self, run_dir: Path, stop: threading.Event | None = None, *,
                 cancel_grace_sec: float = 5.0, zygote: WorkerZygote | None = None,
                 checked: CheckedSpec | None = None) -> None:
        self.run_dir = run_dir
        self.run_id = run_dir.name
        self.stop = stop or threading.Event()
        self.cancel_grace_sec = cancel_grace_sec
        self.zygote = zygote  # the workers' template process, started early by main
        self.checked = checked
        """The spec, checked already by this process (it wrote spec.json from it)."""
        self._summary: SummaryWriter | None = None
        self._replicas = RunReplicas(1)  # replicated shared nodesets' hosts (replicas.py)

    def run(self) -> int:
        """Run every selected episode; returns the process exit code.

        A full disk makes the run's writes wait for room (:mod:`evaltui.rundir.diskfull`); past
        the deadline the run ends here: ``failed`` with "disk full: PATH" wherever that
        can still be written, always on stderr and as :attr:`RunExit.DISK_FULL`.
        """
        try:
            return self._run()
        except DiskFull as exc:
            return self._disk_full(exc)

    def _disk_full(self, exc: DiskFull) -> int:
        with suppress(OSError):  # stderr may be run.log on the same full disk
            print(f"evaltui: run {self.run_id} failed: {exc} (resume it once there is room)",
                  file=sys.stderr, flush=True)
        with suppress(OSError):  # still full: the exit code and the line above say it
            if self._summary is not None:
                self._summary.finish(SummaryStatus.FAILED, str(exc), wait_for_room=False)
            touch_done(self.run_dir)
        return RunExit.DISK_FULL

    def _run(self) -> int:
        header = {"run_id": self.run_id, "graph_name": None, "dataset": None, "split": None,
                  "worker_count": 1}
        try:
            checked = self.checked or check_spec(parse_spec(
                read_json(self.run_dir / SPEC_FILENAME)))
        except (OSError, ValueError, SpecError) as exc:
            return self._fail(header, f"cannot load the run: {exc}")
        ev = checked.spec.eval
        header.update(graph_name=ev.graph_name or checked.graph.name, dataset=ev.dataset,
                      split=checked.split, worker_count=ev.worker_count)
        specs = {n: checked.classes[nd.nodeset].node_specs()[nd.op]
                 for n, nd in checked.graph.nodes.items()}
        graph = graph_snapshot(checked, specs)
        DISK.retry(self.run_dir / GRAPH_FILENAME,
                   partial(write_json_atomic, self.run_dir / GRAPH_FILENAME, graph))
        episodes = load_episodes(checked.dataset_path)
        plan = RunStop(ev, checked.episode_indices, episodes)  # the order; the stop rule
        # A summary writer that fails for good stops the run (then failed, below).
        summary = self._summary = SummaryWriter(
            self.run_dir, header, len(plan.order),
            max_error_rate=ev.max_error_rate, on_failure=lambda _exc: self.stop.set())
        self._replicas = RunReplicas(ev.worker_count)
        summary.replicas = self._replicas.book.snapshot
        summary.check_notes = list(checked.notes) or None
        kept, attempts = earlier_rows(self.run_dir, plan.order)
        summary.preload(kept)
        summary.stopped = plan.preload(kept)  # met already: a resumed run that stopped
        summary.start()
        d_th = float(getattr(checked.classes[checked.graph.loop.env], "success_distance", 1.0))
        row_base = {**header, "nodes": node_list(checked, specs)}
        todo = plan.todo({r.episode_index for r in kept})

        def record(result: EpisodeResult) -> None:
            row = episode_row(row_base, episodes[result.index], result)
            ep_dir = episode_dir(self.run_dir, result.index)
            traj = result.outcome.trajectory or trajectory_record(
                episodes[result.index], result.outcome.status, None, success_distance=d_th)

            def write() -> None:
                ep_dir.mkdir(parents=True, exist_ok=True)  # a worker may have died before it
                write_json_atomic(ep_dir / TRAJECTORY_FILENAME,
                                  trajectory_json(result.index, traj), durable=False)
                write_json_atomic(ep_dir / EPISODE_FILENAME, row.model_dump(mode="json"),
                                  durable=False)

            DISK.retry(ep_dir, write)  # a full disk: wait for room (the pool deals nothing)
            summary.add(row, unsynced=[ep_dir / TRAJECTORY_FILENAME, ep_dir / EPISODE_FILENAME])
            summary.stopped = plan.on_result(result, row) or summary.stopped

        hosts: list[HostProcess] = []
        sockets = SocketDir(self.run_dir)
        try:
            if todo and not self.stop.is_set():
                with self._executor(checked, episodes, len(todo), sockets, hosts) as executor:
                    plan.stop_dealing = executor.stop_dealing
                    executor.run(todo, record, attempts_before=attempts)
            summary.stopped = plan.note(closing=True)
        except (HostStartError, NodesetBuildError, ChannelError) as exc:
            return self._end(summary, SummaryStatus.FAILED,
                             f"cannot build the graph's nodesets: {exc}")
        except ExecutorError as exc:
            return self._end(summary, SummaryStatus.FAILED, str(exc))
        finally:
            self._replicas.stop()  # their last requests count, before the hosts go
            for host in hosts:
                host.stop()
            sockets.remove()
        if summary.failure is not None:  # its flusher stopped the run
            if isinstance(summary.failure, DiskFull):
                raise summary.failure
            return self._end(summary, SummaryStatus.FAILED, f"cannot write summary.json: "
                             f"{type(summary.failure).__name__}: {summary.failure}")
        if self.stop.is_set():
            return self._end(summary, SummaryStatus.CANCELLED)
        every_error = summary.every_episode_errored()
        if every_error is not None:
            return self._end(summary, SummaryStatus.FAILED, every_error)
        return self._end(summary, SummaryStatus.DONE)

    # ---- pieces ---------------------------------------------------------------------------
    def _end(self, summary: SummaryWriter, status: SummaryStatus, error: str | None = None
             ) -> int:
        """The run's last writes (its final summary, then ``_DONE``); its exit code."""
        summary.finish(status, error)
        self._touch_done()
        return _EXITS[status]

    def _touch_done(self) -> None:
        """``_DONE``, last; waiting for room on a full disk like every write of the run."""
        DISK.retry(self.run_dir / DONE_FILENAME, partial(touch_done, self.run_dir))

    def _executor(self, checked: CheckedSpec, episodes: list[dict[str, Any]], todo: int,
                  sockets: SocketDir, hosts: list[HostProcess]) -> EpisodeExecutor:
        """The spec's executor (``engine/executor/kinds.py`` names them), built here."""
        build = self._BUILDERS[checked.spec.eval.executor]
        return build(self, checked, episodes, min(checked.spec.eval.worker_count, todo),
                     sockets, hosts)

    def _local_executor(self, checked: CheckedSpec, _episodes: list[dict[str, Any]],
                        workers: int, sockets: SocketDir, hosts: list[HostProcess]
                        ) -> EpisodeExecutor:
        """K worker processes forked from this run's zygote."""
        shared = self._shared_endpoints(checked, new_secret(), sockets, hosts)
        return EnvWorkerPool(self._configs(checked, shared), workers, hosts=hosts,
                             zygote=self.zygote, host_lost=self._replicas.host_lost,
                             **self._dealing(checked))

    def _ray_executor(self, checked: CheckedSpec, episodes: list[dict[str, Any]],
                      workers: int, sockets: SocketDir, hosts: list[HostProcess]
                      ) -> EpisodeExecutor:
        """K actors on a Ray cluster."""
        # optional: ray (the ray extra): the Ray executor's package, ~25 ms a run process
        # that runs locally would pay
        from evaltui.engine.executor.ray.executor import RayExecutor

        ray_executor = RayExecutor(
            checked, episodes, workers,
            address=checked.spec.eval.ray_address or settings().ray_address,
            shared=self._shared_endpoints(checked, b"", sockets, hosts, given_only=True),
            run_key=SocketDir(self.run_dir).prefix.rstrip("-"), **self._dealing(checked))
        if self._summary is not None:  # its replicas, as the local ones are
            self._summary.replicas = ray_executor.hosts.notes.snapshot
        return ray_executor

    def _slurm_executor(self, checked: CheckedSpec, _episodes: list[dict[str, Any]],
                        workers: int, sockets: SocketDir, hosts: list[HostProcess]
                        ) -> EpisodeExecutor:
        """K job steps of this run's Slurm allocation; shared nodesets are hosted here, on
        TCP, where the steps on other nodes reach them."""

        shared = self._shared_endpoints(checked, new_secret(), sockets, hosts,
                                        tcp_host=listen_host())
        slurm = checked.spec.eval.slurm
        return SlurmExecutor(self._configs(checked, shared), workers,
                             cpus_per_worker=slurm.cpus_per_worker,
                             mem_per_worker_mb=slurm.mem_per_worker_mb, hosts=hosts,
                             host_lost=self._replicas.host_lost, **self._dealing(checked))

    _BUILDERS = {"local": _local_executor, "ray": _ray_executor, "slurm": _slurm_executor}
    """How each executor of ``engine/executor/kinds.EXECUTORS`` is built, by its name."""

    def _configs(self, checked: CheckedSpec, shared: Mapping[str, SharedEndpoint]
                 ) -> Callable[[int], WorkerConfig]:
        """Each worker slot's config (local and Slurm workers)."""
        make = partial(WorkerConfig, self.run_dir, checked=checked, shared=shared,
                       call_timeout=checked.spec.eval.per_step_budget_sec)
        return lambda slot: make(slot=slot)

    def _dealing(self, checked: CheckedSpec) -> DealingOptions:
        """What every executor's dealing core is given: retries, stop, the hung budgets."""
        ev = checked.spec.eval
        return {"max_episode_retries": ev.max_episode_retries, "stop": self.stop,
                "cancel_grace_sec": self.cancel_grace_sec,
                "hung_step_sec": ev.per_step_budget_sec, "hung_reset_sec": reset_budget(ev),
                "episode_log": partial(_episode_log, self.run_dir)}

    def _fail(self, header: Mapping[str, Any], error: str) -> int:
        return self._end(SummaryWriter(self.run_dir, header, 0), SummaryStatus.FAILED, error)

    def _shared_endpoints(self, checked: CheckedSpec, secret: bytes, sockets: SocketDir,
                          hosts: list[HostProcess], *, given_only: bool = False,
                          tcp_host: str | None = None) -> dict[str, SharedEndpoint]:
        """Where each shared nodeset lives: a URL the backend gave, or a host started here
        (with ``given_only``, the given ones alone: the Ray executor hosts the others)."""

        urls = self._given_urls(checked)
        endpoints: dict[str, SharedEndpoint] = {}
        given_secret: bytes | None = None
        for i, (name, ns) in enumerate(checked.graph.nodesets.items()):
            if ns.parallelism != "shared":
                continue
            if name in urls:
                given_secret = given_secret or host_secret()
                endpoints[name] = SharedEndpoint(urls[name], given_secret)
                continue
            if given_only:
                continue
            if ns.replicas is not None:  # one host per GPU
                endpoints[name] = self._replicas.host(
                    name, ns, secret=secret, socket_base=None if tcp_host else
                    f"{sockets.path()}/{i}-{name[:32]}", tcp_host=tcp_host, hosts=hosts)
                urls[name] = endpoints[name].url
                continue
            host = HostProcess(HostConfig(
                name=name, impl=ns.impl, params=dict(ns.params), secret=secret,
                url=f"evaltui+tcp://{tcp_host}:0" if tcp_host else
                f"evaltui+unix://{sockets.path()}/{i}-{name[:32]}.sock",
                max_batch_size=HOST_MAX_BATCH_SIZE, max_wait_ms=HOST_MAX_WAIT_MS,
                env=allocation_host_env(checked.spec),  # a Slurm job's GPUs: the freest
                environment=ns.environment))
            hosts.append(host)
            urls[name] = host.start()
            endpoints[name] = SharedEndpoint(host.url, secret)
        if hosts:
            DISK.retry(self.run_dir / SHARED_URLS_FILENAME,
                       partial(write_json_atomic, self.run_dir / SHARED_URLS_FILENAME, urls))
        return endpoints

    def _given_urls(self, checked: CheckedSpec) -> dict[str, str]:
        """shared_urls.json (else the spec's ``_shared_urls``), minus this run's own hosts.

        An earlier attempt at this run dir (resume) recorded the URLs of the hosts it
        started; those died with it and are recognised by their socket dir's name.
        """
        path = self.run_dir / SHARED_URLS_FILENAME
        try:
            data = read_json(path) if path.exists() else dict(checked.spec.shared_urls)
        except (OSError, ValueError):
            data = dict(checked.spec.shared_urls)
        own_prefix = SocketDir(self.run_dir).prefix
        given: dict[str, str] = {}
        for name, url in (data if isinstance(data, dict) else {}).items():
            try:
                addr = parse_url(url)
            except (ValueError, TypeError):
                given[name] = url  # let connecting report it, naming the URL
                continue
            if addr.family == "AF_UNIX" and Path(str(addr.address)).parent.name.startswith(
                    own_prefix):
                continue
            given[name] = url
        return given


def _episode_log(run_dir: Path, index: int) -> Path:
    return episode_dir(run_dir, index) / LOG_FILENAME
