"""A two-node local Ray cluster for the ``ray`` tests and the Ray benchmark.

Started once per session with ``ray.cluster_utils.Cluster`` in its own short temp dir
(``RAY_TMPDIR``: Ray's address file and sockets stay out of the user's ``/tmp/ray``), each
node with its own temp dir, 2 CPUs and an 80 MB object store, token auth off
(``RAY_AUTH_MODE=disabled``), no dashboard. The fixture that starts it shuts it down,
and ends by PID any process of it still alive then (never ``ray stop``, which would
stop every Ray of the user).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

OBJECT_STORE_BYTES = 80 * 1024 * 1024


@dataclass
class RayCluster:
    address: str
    temp_root: Path
    node_dirs: list[Path]
    cluster: object
    env_caches: list[Path] = field(default_factory=list)
    """The nodes' own ``EVALTUI_ENV_CACHE`` (head's, second node's), where one was set."""

    def env(self) -> dict[str, str]:
        """What a run subprocess needs to reach this cluster."""
        return {"RAY_ADDRESS": self.address, "RAY_AUTH_MODE": "disabled",
                "RAY_TMPDIR": str(self.temp_root)}



def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def actor_pids(run_dir: Path) -> dict[int, int]:
    """worker slot -> PID of its Ray actor, from the run's log (run.log)."""
    try:
        text = (run_dir / "run.log").read_text()
    except FileNotFoundError:
        return {}
    return {int(w): int(pid) for w, pid in
            re.findall(r"worker (\d+) is Ray actor pid (\d+) on node", text)}


def alive(pid: int) -> bool:
    return _cmdline(pid).startswith("ray::")


def _our_leftovers(temp_root: Path) -> list[int]:
    """Processes still naming this cluster's temp dir (log monitors, agents)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and \
                str(temp_root) in _cmdline(int(entry)):
            found.append(int(entry))
    return found


@contextmanager
def _env(extra: Mapping[str, str]) -> Iterator[None]:
    """``extra`` in os.environ while a node starts: its raylet (and so its workers)
    inherit it. How a test declares per-node fake GPUs."""
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def two_node_cluster(node_env: Sequence[Mapping[str, str]] = ({}, {})
                     ) -> Iterator[RayCluster]:
    """Start the cluster described in the module docstring; shut it down on exit.
    ``node_env``: extra environment of the head's and the second node's processes."""
    from ray.cluster_utils import Cluster

    temp_root = Path(tempfile.mkdtemp(prefix="evt-ray-", dir="/tmp"))  # socket paths: short
    (temp_root / "ray").mkdir()
    saved = {k: os.environ.get(k) for k in ("RAY_TMPDIR", "RAY_AUTH_MODE", "RAY_ADDRESS")}
    os.environ.update(RAY_TMPDIR=str(temp_root), RAY_AUTH_MODE="disabled")
    os.environ.pop("RAY_ADDRESS", None)
    nodes = [temp_root / "head", temp_root / "node2"]
    cluster = None
    try:
        with _env(node_env[0]):
            cluster = Cluster(initialize_head=True, shutdown_at_exit=False, head_node_args=dict(
                num_cpus=2, object_store_memory=OBJECT_STORE_BYTES, include_dashboard=False,
                temp_dir=str(nodes[0])))
        with _env(node_env[1]):
            cluster.add_node(num_cpus=2, object_store_memory=OBJECT_STORE_BYTES,
                             temp_dir=str(nodes[1]))
        caches = [Path(env["EVALTUI_ENV_CACHE"]) for env in node_env
                  if "EVALTUI_ENV_CACHE" in env]
        yield RayCluster(cluster.address, temp_root, nodes, cluster, caches)
    finally:
        if cluster is not None:
            cluster.shutdown()
        deadline = time.monotonic() + 5
        while (left := _our_leftovers(temp_root)) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(temp_root, ignore_errors=True)
