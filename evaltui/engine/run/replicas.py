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
from pathlib import Path

from evaltui.contract.settings import settings
from evaltui.engine.graph.definition import NodesetDef
from evaltui.engine.hosting.batching import HOST_MAX_BATCH_SIZE, HOST_MAX_WAIT_MS
from evaltui.engine.hosting.channel import SharedEndpoint
from evaltui.engine.hosting.hostprocess import HostConfig, HostProcess, HostStartError
from evaltui.engine.hosting.proxy import RemoteNodeset
from evaltui.engine.hosting.replicabook import (
    BookedReplica,
    ReplicaBook,
    enough_started,
    replica_count,
)
from evaltui.engine.hosting.replicaclient import SPREADS
from evaltui.engine.run.gpus import RunGpu, run_gpus

DEFAULT_SPREAD = "slot"
"""Measured faster than ``least_loaded`` (docs/performance.md, "Replicas")."""
POLL_SEC = 0.25


class RunReplicas:
    """Every replicated nodeset of one run, hosted here: the local placement of the
    replica book (:mod:`evaltui.engine.hosting.replicabook`); ``stop`` ends its reading."""

    def __init__(self, worker_count: int) -> None:
        self.worker_count = worker_count
        self.book = ReplicaBook(self._served, POLL_SEC)
        self._secret = b""
        self._said_no_gpu = False
        self._stats: dict[int, RemoteNodeset] = {}
        """One stats connection per replica, kept open (the book's thread alone uses it)."""

    def host(self, name: str, ns: NodesetDef, *, secret: bytes, socket_base: str | None,
             tcp_host: str | None, hosts: list[HostProcess]) -> SharedEndpoint:
        """Start the replicas of one nodeset (appended to ``hosts``); their endpoint.

        ``socket_base``: the unix socket path without ``.sock`` (else ``tcp_host``).
        """
        spread = check_spread(settings().replica_spread)  # refused before anything starts
        replicas: list[BookedReplica] = []
        for k, gpu in enumerate(self._placement(name, ns)):
            url = f"evaltui+tcp://{tcp_host}:0" if tcp_host else \
                f"evaltui+unix://{socket_base}-r{k}.sock"
            host = HostProcess(HostConfig(
                name=name, impl=ns.impl, params=dict(ns.params), secret=secret, url=url,
                max_batch_size=HOST_MAX_BATCH_SIZE, max_wait_ms=HOST_MAX_WAIT_MS,
                env=gpu.env() if gpu else {}, environment=ns.environment))
            hosts.append(host)
            replicas.append(BookedReplica(host, gpu.label if gpu else None,
                                          lambda h=host: h.pid))
            host.spawn()  # side by side: N model loads overlap
        started = self._await(name, ns, replicas, hosts)
        self.book.add(name, *replicas)
        self._secret = secret
        self.book.start()
        urls = tuple(r.handle.url for r in started)
        if len(urls) == 1:
            return SharedEndpoint(urls[0], secret)
        board = None
        if spread == "least_loaded" and socket_base:
            board = f"{socket_base}.load"
            Path(board).write_bytes(bytes(self.worker_count))
        return SharedEndpoint(urls[0], secret, urls=urls, spread=spread, board=board)

    @staticmethod
    def _await(name: str, ns: NodesetDef, replicas: list[BookedReplica],
               hosts: list[HostProcess]) -> list[BookedReplica]:
        """Wait for every replica; those that could not start are lost, as long as
        ``min_replicas`` did start (else the run fails naming the first one's GPU)."""
        started: list[BookedReplica] = []
        failed: list[tuple[BookedReplica, HostStartError]] = []
        for replica in replicas:
            try:
                replica.handle.wait_ready()
                started.append(replica)
            except HostStartError as exc:
                failed.append((replica, exc))
        if failed and not enough_started(ns, len(started), len(replicas)):
            replica, exc = failed[0]  # name the GPU: it may be what is wrong
            raise HostStartError(f"the replica on {replica.gpu or 'the host'}: {exc}") from exc
        for replica, exc in failed:
            replica.state = "lost"
            replica.handle.stop(grace_sec=0.5)
            hosts.remove(replica.handle)  # nothing to watch or restart
            print(f"evaltui: the replica of shared nodeset {name!r} on "
                  f"{replica.gpu or 'the host'} could not start ({exc}); going on degraded "
                  f"with {len(started)} of {len(replicas)} replicas", file=sys.stderr,
                  flush=True)
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
        has = f"the run has {len(gpus)} ({', '.join(g.label for g in gpus)})"
        return list(gpus[:replica_count(name, ns, len(gpus), has, HostStartError)])

    # ---- deaths ----------------------------------------------------------------------------
    def host_lost(self, host: HostProcess, how: str) -> bool:
        """A host died: True when it was a replica with others still up (now lost, not to be
        restarted); False for any other host, which the executor restarts as before."""
        with self.book.lock:
            for name, replicas in self.book.sets.items():
                mine = [r for r in replicas if r.handle is host]
                if not mine:
                    continue
                if mine[0].state == "lost":
                    return True  # said already
                up = [r for r in replicas if r.state == "up" and r.handle is not host]
                if not up:
                    return False  # the last one: restarted like any host
                mine[0].state = "lost"
                print(f"evaltui: replica of shared nodeset {name!r} on "
                      f"{mine[0].gpu or 'the host'} died ({how}); going on degraded with "
                      f"{len(up)} of {len(replicas)} replicas", file=sys.stderr, flush=True)
                if host.child is not None:
                    host.child.end(grace_sec=0.5)
                return True
        return False

    # ---- summary ---------------------------------------------------------------------------
    def stop(self) -> None:
        """Read the requests served one last time (before the hosts stop), then stop."""
        self.book.stop()
        for proxy in self._stats.values():
            proxy.close()
        self._stats.clear()

    def _served(self, replica: BookedReplica) -> int:
        proxy = self._stats.get(id(replica))
        if proxy is None:
            proxy = self._stats[id(replica)] = RemoteNodeset(
                replica.handle.url, self._secret, timeout=2.0, connect_timeout=0.2)
        try:
            return int(proxy.stats().get("requests", 0))
        except Exception:  # dying or restarting: the book keeps the last reading
            proxy.close()
            raise


def check_spread(value: str | None) -> str:
    """``EVALTUI_REPLICA_SPREAD``, checked (a start error naming the choices)."""
    spread = value or DEFAULT_SPREAD
    if spread not in SPREADS:
        raise HostStartError(f"EVALTUI_REPLICA_SPREAD={value!r}: must be one of {list(SPREADS)}")
    return spread
