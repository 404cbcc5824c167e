"""A node whose raylet is SIGKILLed mid-run (issue 24): Ray keeps listing it alive for
~15 s and its actors' calls fail as "actor is temporarily unavailable ... rpc_code: 14",
which once read as a plain worker death (with ``max_episode_retries`` 0 the run lost
those episodes). The run's own liveness rule (engine/executor/ray/liveness.py) must take
it as node loss within 4 s, retry its episodes on the other nodes without counting them
against ``max_episode_retries``, and the cluster scheduler's probe (the one that makes a
run ``no_node`` and moves it) must see the node gone within the same bound.

The node is the ``third_node`` added for the test (the session cluster is back to two
nodes after it); its raylet's PID comes from the process tree the test cluster started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import psutil
from raycluster import RayCluster, _cmdline, actor_pids
from runhelpers import episode_rows, running, wait_until
from test_ray_faults import corridor_spec, importable_fixtures  # noqa: F401
from test_ray_node_loss import (  # noqa: F401
    RETRY_WITHIN_SEC,
    actor_lines,
    first_record_t,
    third_node,
)

from evaltui.rundir.jsonfiles import read_json

LOST_WITHIN_SEC = 4.0
"""The docs' bound on a node's loss -> the run (and the scheduler) taking it as lost."""


def raylet_tree(node: Any) -> tuple[int, set[int]]:
    """The node's raylet PID (as the test cluster started it) and its child processes."""
    pid = node.all_processes["raylet"][0].process.pid
    return pid, {c.pid for c in psutil.Process(pid).children(recursive=True)}


def close_probe(probe: Any) -> None:
    """Close the test's probe and end the ledger actor it made (detached: it would
    outlive the test). The test's reservation never reached the ledger."""
    probe._held.clear()
    probe._ray.kill(probe.ledger, no_restart=True)
    probe.close()


def left_of(pids: set[int]) -> list[tuple[int, str]]:
    """The processes of ``pids`` still running (a zombie has exited)."""
    left = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append((pid, _cmdline(pid)[:120]))
    return left


def test_a_sigkilled_raylet_is_node_loss_within_4_s_and_its_episodes_run_elsewhere(
        ray_cluster: RayCluster, third_node: Any, tmp_path: Path) -> None:  # noqa: F811
    from evaltui.scheduler.cluster.probe import ClusterProbe

    lost_id = third_node.node_id
    spec = corridor_spec(tmp_path, [25] * 6, ray_cluster.address,
                         env={"step_sleep_sec": 0.06}, worker_count=3, max_episode_retries=0)
    probe = ClusterProbe(ray_cluster.address)
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(close_probe, probe)
        # A scheduler's reservation on the third node, as when it admitted a run there.
        probe.adopt("raylet-kill-run", lost_id, 0, 1024, False, "node-3")
        probe.read()
        assert lost_id in (probe.alive or set()) and not probe.displaced()
        run_dir, proc = cleanup.enter_context(running(spec, tmp_path / "out"))

        def all_busy_one_on_the_lost_node() -> bool:
            lines = actor_lines(run_dir) if (run_dir / "run.log").exists() else []
            logs = [p for p in run_dir.glob("episodes/ep*/log.jsonl") if p.stat().st_size]
            return len(lines) == 3 and len(logs) == 3 and \
                any(node == lost_id[:8] for _, node in lines)

        wait_until(all_busy_one_on_the_lost_node, timeout=60,
                   what="three actors, one on the third node, each running an episode")
        victims = {slot for slot, node in actor_lines(run_dir) if node == lost_id[:8]}
        on_node = {pid for slot, pid in actor_pids(run_dir).items() if slot in victims}
        raylet, children = raylet_tree(third_node)
        killed_at = time.time()
        os.kill(raylet, signal.SIGKILL)
        seen: dict[str, float] = {}
        errors: dict[int, str] = {}

        def run_and_scheduler_took_it_as_lost() -> bool:
            now = time.time()
            if "run" not in seen and \
                    f"node {lost_id[:8]} is lost" in (run_dir / "run.log").read_text():
                seen["run"] = now
            if "scheduler" not in seen:
                probe.read()  # what the scheduler's sampler does each probe interval
                if [r.run_id for r in probe.displaced()] == ["raylet-kill-run"]:
                    seen["scheduler"] = now
            for path in run_dir.glob("episodes/ep*/episode.json"):
                with contextlib.suppress(OSError, ValueError):
                    row = read_json(path)
                    if row["status"] == "error":
                        errors[row["episode_index"]] = row["error"]
            return len(seen) == 2 and len(errors) == len(victims)

        try:
            wait_until(run_and_scheduler_took_it_as_lost, timeout=20,
                       what="the run and the scheduler to take the node as lost")
        except AssertionError as exc:
            raise AssertionError((str(exc), seen, killed_at, errors, probe.alive,
                                  (run_dir / "run.log").read_text()[-3000:])) from None
        assert proc.wait(timeout=90) == 0, (run_dir / "run.log").read_text()[-3000:]
    delays = {who: at - killed_at for who, at in seen.items()}
    print("raylet SIGKILL -> taken as lost:", {k: f"{v:.2f} s" for k, v in delays.items()})
    assert all(d < LOST_WITHIN_SEC for d in delays.values()), delays
    rows = episode_rows(run_dir)
    assert sorted(r["episode_index"] for r in rows) == list(range(6))  # each exactly once
    assert [r["status"] for r in rows] == ["ok"] * 6, \
        [(r["attempts"], r.get("error")) for r in rows]
    retried = [r for r in rows if r["attempts"] > 1]
    assert {r["episode_index"] for r in retried} == set(errors), (rows, errors)
    print("the killed node's episodes:", errors)
    assert all("its node is lost" in e for e in errors.values()), errors
    respawned = actor_lines(run_dir)[3:]
    assert respawned and all(node != lost_id[:8] for _, node in respawned), respawned
    starts = [first_record_t(run_dir / "episodes" / f"ep{r['episode_index']:04d}") - killed_at
              for r in retried]
    print(f"raylet SIGKILL -> retry's first log record: {', '.join(f'{d:.2f} s' for d in starts)}")
    assert all(0 < d < RETRY_WITHIN_SEC for d in starts), starts
    assert read_json(run_dir / "summary.json")["status"] == "done"
    # Nothing of the node left: its raylet's agents and the run's actors died with it
    # (Cluster.add_node starts no log_monitor for a worker node; `ray start` does, see
    # docs/pool.md), and no process names the node's temp dir.
    tree = {raylet, *children, *on_node}
    try:
        wait_until(lambda: not left_of(tree), timeout=15,
                   what="the killed raylet's agents and the run's actors there to exit")
    except AssertionError:
        raise AssertionError(left_of(tree)) from None
    left = [p for p in psutil.pids() if str(third_node.test_dir) in _cmdline(p)]
    assert not left, [(p, _cmdline(p)) for p in left]
