"""RunReplicas: a run's replicated shared nodesets -- one host per GPU (DESIGN §12).

A shared nodeset with ``replicas: N`` (or ``"per_gpu"``) gets one
:class:`~evaltui.engine.hosting.hostprocess.HostProcess` per GPU of the run
(:func:`~evaltui.engine.run.gpus.run_gpus`), up to N, each with that GPU alone in its
``CUDA_VISIBLE_DEVICES`` (and, with fake GPUs, ``EVALTUI_FAKE_GPU_INDEX``). A run that
sees no GPU at all hosts one replica on the host, and says so once (run.log). Fewer GPUs
than ``min_replicas`` (but some) is an error: the scheduler never starts such a run.

Workers reach the replicas through one endpoint with every URL
(:mod:`evaltui.engine.hosting.replicaclient`); how they spread over them is
:data:`DEFAULT_SPREAD` unless ``EVALTUI_REPLICA_SPREAD`` says otherwise.

A replica that cannot start is lost from the start, as long as ``min_replicas`` did
start (else the run fails naming its GPU). A replica whose host dies while others are
up is *lost*: it is not restarted (its GPU
may be what failed, and the scheduler releases its reservation), its callers move to the
other replicas, the episodes in flight on it are retried by the dealing core, and the
summary's ``replicas`` says ``lost``. When the last one dies the run does what it does
for any dead host: it restarts it at its URL, and fails if that fails.

``requests`` (served) is read from each host's stats four times a second and at the end;
a lost replica keeps its last reading.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltui.contract.settings import settings
from evaltui.engine.graph.definition import NodesetDef
from evaltui.engine.hosting.batching import HOST_MAX_BATCH_SIZE, HOST_MAX_WAIT_MS
from evaltui.engine.hosting.channel import SharedEndpoint
from evaltui.engine.hosting.hostprocess import HostConfig, HostProcess, HostStartError
from evaltui.engine.hosting.proxy import RemoteNodeset
from evaltui.engine.hosting.replicaclient import SPREADS
from evaltui.engine.run.gpus import RunGpu, run_gpus

DEFAULT_SPREAD = "slot"
"""Measured faster than ``least_loaded`` (docs/performance.md, "Replicas")."""
POLL_SEC = 0.25


@dataclass
class Replica:
    """One host of a replicated nodeset and what the summary says of it."""

    gpu: RunGpu | None
    host: HostProcess
    requests: int = 0
    state: str = "up"

    def note(self) -> dict[str, Any]:
        return {"gpu": self.gpu.label if self.gpu else None, "pid": self.host.pid,
                "requests": self.requests, "state": self.state}


class RunReplicas:
    """Every replicated nodeset of one run; ``stop`` ends the stats reading."""

    def __init__(self, worker_count: int) -> None:
        self.worker_count = worker_count
        self.sets: dict[str, list[Replica]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._secret = b""
        self._said_no_gpu = False
        self._stats: dict[int, RemoteNodeset] = {}
        """One stats connection per replica, kept open (the poller's thread alone uses it)."""

    def host(self, name: str, ns: NodesetDef, *, secret: bytes, socket_base: str | None,
             tcp_host: str | None, hosts: list[HostProcess]) -> SharedEndpoint:
        """Start the replicas of one nodeset (appended to ``hosts``); their endpoint.

        ``socket_base``: the unix socket path without ``.sock`` (else ``tcp_host``).
        """
        spread = check_spread(settings().replica_spread)  # refused before anything starts
        gpus = self._placement(name, ns)
        replicas: list[Replica] = []
        for k, gpu in enumerate(gpus):
            url = f"evaltui+tcp://{tcp_host}:0" if tcp_host else \
                f"evaltui+unix://{socket_base}-r{k}.sock"
            host = HostProcess(HostConfig(
                name=name, impl=ns.impl, params=dict(ns.params), secret=secret, url=url,
                max_batch_size=HOST_MAX_BATCH_SIZE, max_wait_ms=HOST_MAX_WAIT_MS,
                env=gpu.env() if gpu else {}, environment=ns.environment))
            hosts.append(host)
            replicas.append(Replica(gpu, host))
            host.spawn()  # side by side: N model loads overlap
        started = self._await(name, ns, replicas, hosts)
        with self._lock:
            self.sets[name] = replicas
        self._secret = secret
        self._start_polling()
        urls = tuple(r.host.url for r in started)
        if len(urls) == 1:
            return SharedEndpoint(urls[0], secret)
        board = None
        if spread == "least_loaded" and socket_base:
            board = f"{socket_base}.load"
            Path(board).write_bytes(bytes(self.worker_count))
        return SharedEndpoint(urls[0], secret, urls=urls, spread=spread, board=board)

    @staticmethod
    def _await(name: str, ns: NodesetDef, replicas: list[Replica],
               hosts: list[HostProcess]) -> list[Replica]:
        """Wait for every replica; those that could not start are lost, as long as
        ``min_replicas`` did start (else the run fails naming the first one's GPU)."""
        started: list[Replica] = []
        failed: list[tuple[Replica, HostStartError]] = []
        for replica in replicas:
            try:
                replica.host.wait_ready()
                started.append(replica)
            except HostStartError as exc:
                failed.append((replica, exc))
        if failed and len(started) < max(1, ns.min_replicas):
            replica, exc = failed[0]  # name the GPU: it may be what is wrong
            where = replica.gpu.label if replica.gpu else "the host"
            raise HostStartError(f"the replica on {where}: {exc}") from exc
        for replica, exc in failed:
            replica.state = "lost"
            replica.host.stop(grace_sec=0.5)
            hosts.remove(replica.host)  # nothing to watch or restart
            where = replica.gpu.label if replica.gpu else "the host"
            print(f"evaltui: the replica of shared nodeset {name!r} on {where} could not "
                  f"start ({exc}); going on degraded with {len(started)} of {len(replicas)} "
                  "replicas", file=sys.stderr, flush=True)
        return started

    def _placement(self, name: str, ns: NodesetDef) -> list[RunGpu | None]:
        gpus = run_gpus()
        if not gpus:
            if not self._said_no_gpu:
                print(f"evaltui: no GPU visible: shared nodeset {name!r} (replicas: "
                      f"{ns.replicas}) runs one replica on the host", file=sys.stderr,
                      flush=True)
                self._said_no_gpu = True
            return [None]
        wanted = len(gpus) if ns.replicas == "per_gpu" else int(ns.replicas or 1)
        if len(gpus) < ns.min_replicas:
            raise HostStartError(
                f"shared nodeset {name!r} needs min_replicas={ns.min_replicas} GPUs; the run "
                f"has {len(gpus)} ({', '.join(g.label for g in gpus)})")
        return list(gpus[:max(1, wanted)])

    # ---- deaths ----------------------------------------------------------------------------
    def host_lost(self, host: HostProcess, how: str) -> bool:
        """A host died: True when it was a replica with others still up (now lost, not to be
        restarted); False for any other host, which the executor restarts as before."""
        with self._lock:
            for name, replicas in self.sets.items():
                mine = [r for r in replicas if r.host is host]
                if not mine:
                    continue
                if mine[0].state == "lost":
                    return True  # said already
                up = [r for r in replicas if r.state == "up" and r.host is not host]
                if not up:
                    return False  # the last one: restarted like any host
                mine[0].state = "lost"
                where = mine[0].gpu.label if mine[0].gpu else "the host"
                print(f"evaltui: replica of shared nodeset {name!r} on {where} died ({how}); "
                      f"going on degraded with {len(up)} of {len(replicas)} replicas",
                      file=sys.stderr, flush=True)
                if host.child is not None:
                    host.child.end(grace_sec=0.5)
                return True
        return False

    # ---- summary ---------------------------------------------------------------------------
    def snapshot(self) -> dict[str, list[dict[str, Any]]] | None:
        """summary.json's ``replicas`` (None without replicated nodesets)."""
        with self._lock:
            if not self.sets:
                return None
            return {name: [r.note() for r in rs] for name, rs in self.sets.items()}

    def stop(self) -> None:
        """Read the requests served one last time (before the hosts stop), then stop."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._read_stats()
        self._close_stats()

    def _start_polling(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._poll, name="replica-stats",
                                            daemon=True)
            self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(POLL_SEC):
            self._read_stats()

    def _read_stats(self) -> None:
        with self._lock:
            up = [r for rs in self.sets.values() for r in rs if r.state == "up"]
        for replica in up:
            proxy = self._stats.get(id(replica))
            if proxy is None:
                proxy = self._stats[id(replica)] = RemoteNodeset(
                    replica.host.url, self._secret, timeout=2.0, connect_timeout=0.2)
            try:
                served = int(proxy.stats().get("requests", 0))
            except Exception:  # dying or restarting: keep the last reading
                proxy.close()
                continue
            with self._lock:
                replica.requests = max(replica.requests, served)

    def _close_stats(self) -> None:
        for proxy in self._stats.values():
            proxy.close()
        self._stats.clear()


def check_spread(value: str | None) -> str:
    """``EVALTUI_REPLICA_SPREAD``, checked (a start error naming the choices)."""
    spread = value or DEFAULT_SPREAD
    if spread not in SPREADS:
        raise HostStartError(f"EVALTUI_REPLICA_SPREAD={value!r}: must be one of {list(SPREADS)}")
    return spread
