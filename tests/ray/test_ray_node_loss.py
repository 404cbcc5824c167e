"""A node lost mid-run: its episodes are retried on the other nodes, the run ends ``done``,
and the retry starts seconds after the loss, not after Ray's own ~15 s node death timeout.

A third node is added to the session cluster for each case and lost while its actor
runs an episode (the session is back to its two nodes before the next test).
``removed`` is ``Cluster.remove_node``: the raylet stops, its workers die, their sockets
close and Ray reports the actor gone at once. ``frozen`` SIGSTOPs the node's processes
(a hung machine or a dropped network: nothing answers, nothing closes), which only the
run's own liveness rule catches (engine/executor/ray/liveness.py: the raylet's health
check unanswered for 2 s; the unanswered-pull rule, ``UNREACHABLE_SEC``, is the backstop).
A SIGKILLed raylet is tests/ray/test_ray_raylet_kill.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from raycluster import OBJECT_STORE_BYTES, RayCluster, _cmdline, actor_pids
from runhelpers import episode_rows, running, wait_until
from test_ray_faults import corridor_spec, importable_fixtures  # noqa: F401

from evaltui.rundir.jsonfiles import read_json

RETRY_WITHIN_SEC = 10.0
"""Asserted bound on loss -> the retry's first log record. Measured on the shared 2-core
machine: removed 0.2-0.7 s (2.2-2.9 s with the raylet SIGKILLed), frozen 4.06-4.13 s
(the 4 s rule plus a pull slice). 5 s is the aim; 10 s is asserted because a loaded
machine can add seconds to an actor start, and it still fails if Ray's ~15 s death
timeout is what ends the attempt."""


@pytest.fixture
def third_node(ray_cluster: RayCluster) -> Iterator[Any]:
    """A node added for one test, in its own temp dir; removed at the end if still up."""
    cluster: Any = ray_cluster.cluster
    node_dir = tempfile.mkdtemp(prefix="node3-", dir=ray_cluster.temp_root)
    node = cluster.add_node(num_cpus=2, object_store_memory=OBJECT_STORE_BYTES,
                            temp_dir=node_dir)
    node.test_dir = Path(node_dir)
    try:
        yield node
    finally:
        if node in cluster.worker_nodes:
            cluster.remove_node(node, allow_graceful=False)
        # Until Ray declares the node dead (~15 s) it may place the next tests' actors
        # there: they would hang. The session cluster goes back to two nodes first.
        cluster.wait_for_nodes(timeout=40)


def actor_lines(run_dir: Path) -> list[tuple[int, str]]:
    """(worker slot, node id prefix) of each actor the run started, in order."""
    text = (run_dir / "run.log").read_text()
    return [(int(w), node) for w, node in
            re.findall(r"worker (\d+) is Ray actor pid \d+ on node \S+ \((\w+)\)", text)]


def first_record_t(ep_dir: Path) -> float:
    return float(orjson.loads((ep_dir / "log.jsonl").read_bytes().splitlines()[0])["t"])


def freeze(node_dir: Path, actor_pids: list[int]) -> set[int]:
    """SIGSTOP every process of the node (raylet, its agents, its actors): the node stops
    answering but its sockets stay open, as when a machine hangs or its network drops."""
    pids = {*actor_pids, *(int(e) for e in os.listdir("/proc") if e.isdigit()
                           and str(node_dir) in _cmdline(int(e)))}
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    return pids


def kill_frozen(pids: set[int]) -> None:
    """A stopped actor never sees its raylet go: each frozen process is ended by PID."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def thaw_and_remove(cluster: Any, node: Any, pids: set[int]) -> None:
    """After the test: the frozen node's processes continued, then the node removed
    gracefully (its raylet tells the GCS it leaves, at once; SIGKILLed, the node would be
    listed alive for Ray's ~15 s more, which ``third_node`` waits out), then by PID
    whatever of it is still there."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    if node in cluster.worker_nodes:
        cluster.remove_node(node)
    kill_frozen(pids)


@pytest.mark.parametrize("how", ["removed", "frozen"])
def test_a_lost_node_s_episode_is_retried_elsewhere_within_seconds(
        ray_cluster: RayCluster, third_node: Any, tmp_path: Path, how: str) -> None:
    lost_id = third_node.node_id[:8]
    spec = corridor_spec(tmp_path, [25] * 6, ray_cluster.address,
                         env={"step_sleep_sec": 0.06}, worker_count=3, max_episode_retries=1)
    frozen: set[int] = set()
    with running(spec, tmp_path / "out") as (run_dir, proc), \
            contextlib.ExitStack() as cleanup:
        cleanup.callback(lambda: thaw_and_remove(ray_cluster.cluster, third_node, frozen)
                         if frozen else None)

        def all_busy_one_on_the_lost_node() -> bool:
            lines = actor_lines(run_dir) if (run_dir / "run.log").exists() else []
            logs = [p for p in run_dir.glob("episodes/ep*/log.jsonl") if p.stat().st_size]
            return len(lines) == 3 and len(logs) == 3 and \
                any(node == lost_id for _, node in lines)

        wait_until(all_busy_one_on_the_lost_node, timeout=40,
                   what="three actors, one on the third node, each running an episode")
        victims = {slot for slot, node in actor_lines(run_dir) if node == lost_id}
        lost_at = time.time()
        if how == "removed":  # the raylet is stopped, its workers die: sockets close
            ray_cluster.cluster.remove_node(third_node)  # type: ignore[attr-defined]
        else:
            frozen = freeze(third_node.test_dir, [
                pid for slot, pid in actor_pids(run_dir).items() if slot in victims])
        errors: dict[int, str] = {}

        def error_rows() -> bool:
            for path in run_dir.glob("episodes/ep*/episode.json"):
                try:
                    row = read_json(path)
                except (OSError, ValueError):
                    continue
                if row["status"] == "error":
                    errors[row["episode_index"]] = row["error"]
            return len(errors) == len(victims)

        wait_until(error_rows, timeout=20, what="the lost node's episodes' error rows")
        assert proc.wait(timeout=60) == 0, (run_dir / "run.log").read_text()[-3000:]
    rows = episode_rows(run_dir)
    assert [r["status"] for r in rows] == ["ok"] * 6, \
        [(r["attempts"], r.get("error")) for r in rows]
    retried = [r for r in rows if r["attempts"] == 2]
    assert {r["episode_index"] for r in retried} == set(errors), (rows, errors)
    print("lost node's episodes:", errors)
    assert all(e.startswith("worker died (node ") for e in errors.values()), errors
    if how == "frozen":  # the liveness rule, before the 4 s pull rule
        assert all("its raylet did not answer for 2 s" in e and "its node is lost" in e
                   for e in errors.values()), errors
    respawned = actor_lines(run_dir)[3:]
    assert all(node != lost_id for _, node in respawned), respawned
    if how == "frozen":  # Ray still lists the node: the executor keeps new actors off it
        assert {slot for slot, _ in respawned} >= victims, respawned
    log = (run_dir / "run.log").read_text()
    delays = [first_record_t(run_dir / "episodes" / f"ep{r['episode_index']:04d}") - lost_at
              for r in retried]
    print(f"node loss -> retry's first log record: {', '.join(f'{d:.2f} s' for d in delays)}")
    assert all(0 < d < RETRY_WITHIN_SEC for d in delays), (delays, log[-3000:])
    assert read_json(run_dir / "summary.json")["status"] == "done"
