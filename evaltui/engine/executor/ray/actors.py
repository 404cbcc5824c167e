"""What runs inside the Ray cluster: worker actors and shared-nodeset actors.

Plain classes, made Ray actors by :mod:`evaltui.engine.executor.ray.executor` (``ray.remote``), so
this module imports without ray; ray itself is imported only inside actor processes.

- :class:`EpisodeWorkerActor` is one worker slot: a
  :class:`~evaltui.engine.episode.session.WorkerSession` (the same per-episode body as a local
  worker) that logs each episode into a node-local scratch dir. It is a threaded actor
  with two threads: one runs :meth:`~EpisodeWorkerActor.run_episode`, the other answers
  :meth:`~EpisodeWorkerActor.read_since` (the episode's new log/frame bytes, which the run
  process appends into the real ep dir while the episode runs) and
  :meth:`~EpisodeWorkerActor.cancel`. No path of the run dir ever reaches a node.
- :class:`NodesetActor` hosts one shared nodeset behind the engine's own
  :class:`~evaltui.engine.hosting.batching.BatchedInferenceServer` (same flush rule as a local
  host); :class:`RayNodeset` is the worker side's proxy of it.
"""

from __future__ import annotations

import os
import pickle
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaltui.contract.records import ASSETS_DIRNAME, LOG_FILENAME
from evaltui.engine.episode.loop import EpisodeOutcome
from evaltui.engine.episode.session import WorkerSession
from evaltui.engine.executor.ray.fateshare import follow_raylet
from evaltui.engine.executor.ray.replicas import RayReplicaClient
from evaltui.engine.hosting.batching import BatchedInferenceServer
from evaltui.engine.hosting.proxy import RemoteNodeset
from evaltui.engine.nodes import import_impl
from evaltui.engine.usererrors import build_nodeset

CHUNK_MAX_BYTES = 8 << 20
"""At most this much of one file per pull (a pull is a Ray object)."""
PULLED_FILES = (LOG_FILENAME, "frames.bin")
"""Files the run process appends while the episode runs; ``assets/`` come at its end."""


class EpisodeWorkerActor:
    """One worker slot on a cluster node; see the module docstring."""

    def __init__(self, slot: int, run_key: str) -> None:

        follow_raylet()  # orphaned by a dead raylet, nothing could end it
        self.slot = slot
        self.stop = threading.Event()
        self.session: Any = None
        self.shared: dict[str, Any] = {}
        self.scratch = Path(tempfile.mkdtemp(prefix=f"{run_key}-w{slot}-",
                                             dir=_node_temp_dir()))
        self.current: tuple[int, int] | None = None
        self.ep_dir: Path | None = None

    def setup(self, checked_blob: bytes, workspace: str | None,
              shared: Mapping[str, tuple[str, Any]], call_timeout: float | None
              ) -> dict[str, Any]:
        """Build the worker's nodesets and reach the shared ones; where it runs.

        The CheckedSpec comes pickled (its nodeset classes by reference) and is unpickled
        only once the workspace is on ``sys.path``, so user nodesets import.
        """
        # optional: ray (the ray extra)
        import ray

        if workspace and workspace not in sys.path:
            sys.path.insert(0, workspace)  # user nodesets, if the node has that dir
        checked = pickle.loads(checked_blob)
        for name, (kind, where) in shared.items():
            if kind == "ray":
                self.shared[name] = RayNodeset(where, self.slot, call_timeout)
            elif kind == "rays":  # replicas, one per GPU
                self.shared[name] = RayReplicaClient(
                    [RayNodeset(a, self.slot, call_timeout) for a in where], self.slot)
            else:  # a URL the backend gave (reachable from this node: tcp)
                self.shared[name] = RemoteNodeset(where.url, where.secret,
                                                  timeout=call_timeout).connect()
        self.session = WorkerSession(self.slot, checked, self.shared, self.stop)
        ctx = ray.get_runtime_context()
        return {"node_id": ctx.get_node_id(), "node_ip": ray.util.get_node_ip_address(),
                "pid": os.getpid(), "scratch": str(self.scratch)}

    def run_episode(self, index: int, attempt: int, episode: Mapping[str, Any]
                    ) -> EpisodeOutcome:
        """Run one dealt episode (attempt ``attempt``) into a fresh scratch ep dir."""
        if self.ep_dir is not None:
            shutil.rmtree(self.ep_dir, ignore_errors=True)  # already pulled by the run
        ep_dir = self.scratch / f"ep{index:04d}-a{attempt}"
        self.ep_dir, self.current = ep_dir, (index, attempt)
        return self.session.run_episode(episode, ep_dir)

    def read_since(self, index: int, attempt: int, offsets: Mapping[str, int]
                   ) -> dict[str, bytes] | None:
        """New bytes of the episode's files past ``offsets``; None for another attempt."""
        if self.current != (index, attempt) or self.ep_dir is None:
            return None  # a stale pull: its chunks must not reach the new attempt's files
        chunks: dict[str, bytes] = {}
        for name in PULLED_FILES:
            try:
                with open(self.ep_dir / name, "rb") as fh:
                    fh.seek(offsets.get(name, 0))
                    data = fh.read(CHUNK_MAX_BYTES)
            except FileNotFoundError:
                continue
            if data:
                chunks[name] = data
        return chunks

    def assets(self, index: int, attempt: int) -> dict[str, bytes]:
        """The episode's ``assets/`` files (PNG frames), once it has ended."""
        if self.current != (index, attempt) or self.ep_dir is None:
            return {}
        root = self.ep_dir / ASSETS_DIRNAME
        if not root.is_dir():
            return {}
        return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}

    def cancel(self) -> None:
        """End the episode in flight ``cancelled`` at its next step boundary."""
        self.stop.set()

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
        for proxy in self.shared.values():
            proxy.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def _node_temp_dir() -> str | None:
    """This Ray node's own temp dir (``ray start --temp-dir``), else the system's."""
    try:
        # optional: ray (the ray extra)
        import ray._private.worker as ray_worker

        node = ray_worker._global_node
        return str(node.get_temp_dir_path()) if node is not None else None
    except Exception:  # a private API: fall back to the process's temp dir
        return None


class NodesetActor:
    """A shared nodeset hosted by a BatchedInferenceServer in a Ray actor.

    Each call blocks one of the actor's threads until its batch ran (the actor's
    ``max_concurrency`` is above the worker count), so K workers' calls coalesce under
    the same rule as in a local host: ``callers`` is the number of worker slots that
    have called a node so far.
    """

    def __init__(self, impl: str, params: Mapping[str, Any], max_batch_size: int,
                 max_wait_ms: float, workspace: str | None = None,
                 class_blob: bytes | None = None) -> None:

        follow_raylet()
        if workspace and workspace not in sys.path:
            sys.path.insert(0, workspace)
        # A nodeset in its own environment comes as its stand-in class, pickled: unpickled
        # here, it finds (or builds) its environment on this node (engine/foreign/standin).
        cls = pickle.loads(class_blob) if class_blob is not None else import_impl(impl)
        self.nodeset = build_nodeset(impl, cls, params)  # one-line error
        self._callers: set[int] = set()
        self.server = BatchedInferenceServer(
            self.nodeset, max_batch_size=max_batch_size, max_wait_ms=max_wait_ms,
            callers=lambda: len(self._callers)).start()

    def ping(self) -> dict[str, Any]:
        # optional: ray (the ray extra)
        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}

    def call(self, caller: int, op: str, inputs: Mapping[str, Any],
             timeout: float | None) -> Any:
        self._callers.add(caller)
        return self.server.call(op, inputs, timeout)

    def method(self, name: str, args: tuple[Any, ...], timeout: float | None) -> Any:
        return self.server.call(name, args, timeout, is_method=True)

    def stats(self) -> dict[str, Any]:
        return self.server.stats()

    def close(self) -> None:
        self.server.close()
        self.nodeset.close()


class RayNodeset:
    """A worker's handle on a :class:`NodesetActor`: looks like a local nodeset.

    A node's exception comes back as Ray's task error, which is an instance of the
    node's own exception class and carries the remote traceback in its message.
    """

    def __init__(self, actor: Any, caller: int, timeout: float | None) -> None:
        self.actor, self.caller, self.timeout = actor, caller, timeout

    def _get(self, ref: Any) -> Any:
        # optional: ray (the ray extra)
        import ray

        # Ray's own deadline sits past the server's, which fails a queued request first.
        wait = None if self.timeout is None else self.timeout + 5.0
        return ray.get(ref, timeout=wait)

    def call(self, op: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return self._get(self.actor.call.remote(self.caller, op, dict(inputs), self.timeout))

    def set_episode(self, episode: Mapping[str, Any]) -> dict[str, Any]:
        return self._get(self.actor.method.remote("set_episode", (dict(episode),),
                                                  self.timeout))

    def begin_episode(self, episode: Mapping[str, Any]) -> None:
        self._get(self.actor.method.remote("begin_episode", (dict(episode),), self.timeout))

    def trajectory(self) -> Any:
        return self._get(self.actor.method.remote("trajectory", (), self.timeout))

    def close(self) -> None:
        pass  # the executor owns the actor
