"""Shared nodesets: refcounts per run, unload on the tick after zero, interactive pinning."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from proctools import kill_group
from schedhelpers import line_spec, wait_until

from evaltui.contract.pidref import PidRef
from evaltui.contract.states import RunState
from evaltui.engine.hosting.channel import host_secret
from evaltui.engine.hosting.proxy import connect
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.admission.calibration import NodesetPart, nodeset_key
from evaltui.scheduler.events import NodesetsChanged
from evaltui.scheduler.scheduler import JobScheduler
from evaltui.scheduler.shared.launcher import SubprocessLauncher
from evaltui.scheduler.shared.nodesets import HostedProcess, NodesetError, SharedNodesets


class SleepLauncher:
    """Hosts are real processes (``sleep``, own session); the URL is a label."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, impl: str, params: Mapping[str, Any],
              env: Mapping[str, str]) -> HostedProcess:
        proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
        self.procs.append(proc)
        return HostedProcess(f"test://{name}/{proc.pid}", PidRef.of(proc.pid))

    def stop(self, hosted: HostedProcess) -> None:
        kill_group(hosted.ref.pid)
        next(p for p in self.procs if p.pid == hosted.ref.pid).wait()

    def close(self) -> None:
        for proc in self.procs:
            kill_group(proc.pid)
            proc.wait()


class SlowLauncher(SubprocessLauncher):
    """The real launcher, with a model that loads once ``go`` is set (at most ``load_sec``):
    the test decides when a load ends, so a busy machine cannot reorder its steps."""

    def __init__(self, load_sec: float) -> None:
        super().__init__()
        self.load_sec = load_sec
        self.go = threading.Event()

    def start(self, name: str, impl: str, params: Mapping[str, Any],
              env: Mapping[str, str]) -> HostedProcess:
        self.go.wait(self.load_sec)
        return super().start(name, impl, params, env)


@pytest.fixture
def launcher() -> Any:
    sleep = SleepLauncher()
    yield sleep
    sleep.close()


def part(name: str = "policy", **params: Any) -> NodesetPart:
    impl = "sched_nodesets:VramPolicy"
    return NodesetPart(name, nodeset_key(impl, params), impl, params, "shared", 1)


def test_scheduler_going_away_stops_only_its_idle_nodesets(
        launcher: SleepLauncher, tmp_path: Path) -> None:
    shared = SharedNodesets(launcher, tmp_path / "hosts")
    idle = shared.acquire("run-a", part(), {}, None)
    held = shared.acquire("run-b", part(noise=0.2), {}, None)
    pinned = shared.load("pinned", "sched_nodesets:VramPolicy", {"noise": 0.3}, {})
    shared.release("run-a", tick_no=1)
    # Stopped at once, without waiting for a next tick that will never come.
    assert shared.stop_unheld() == [idle]
    assert not PidRef(idle.hosted.ref.pid, idle.hosted.ref.create_time).alive()
    assert held.hosted.ref.alive() and pinned.hosted.ref.alive()
    assert {ns.name for ns in shared.all()} == {held.name, "pinned"}


def test_refcounted_per_run_and_unloaded_on_the_tick_after_zero(
        launcher: SleepLauncher, tmp_path: Path) -> None:
    shared = SharedNodesets(launcher, tmp_path / "hosts")
    a = shared.acquire("run-a", part(), {}, None)
    b = shared.acquire("run-b", part(), {}, None)
    assert a is b and a.refcount == 2 and len(launcher.procs) == 1
    other = shared.acquire("run-a", part(noise=0.1), {}, None)  # other params: another host
    assert other.name == "policy-" + other.key[:6] and len(launcher.procs) == 2
    shared.release("run-a", tick_no=1)
    assert a.refcount == 1 and shared.tick(1) == [] and shared.tick(2) == [other]
    shared.release("run-b", tick_no=3)
    assert shared.tick(3) == []  # the same tick in which the count reached zero: stays
    shared.acquire("run-c", part(), {}, None)  # reused before the next tick: not unloaded
    assert shared.tick(4) == []
    shared.release("run-c", tick_no=4)
    assert shared.tick(5) == [a] and shared.all() == []
    assert launcher.procs[0].poll() is not None


def test_interactive_loads_stay_and_unload_is_refused_while_in_use(
        launcher: SleepLauncher, tmp_path: Path) -> None:
    shared = SharedNodesets(launcher, tmp_path / "hosts")
    pinned = shared.load("policy", part().impl, {}, {})
    assert shared.acquire("run-a", part(), {}, None) is pinned  # runs reuse it
    shared.release("run-a", tick_no=1)
    assert shared.tick(5) == [] and shared.get("policy") is pinned
    shared.acquire("run-b", part(), {}, None)
    with pytest.raises(NodesetError, match="in use by 1 run"):
        shared.unload("policy")
    shared.release("run-b", tick_no=6)
    assert shared.unload("policy") is pinned and shared.all() == []
    with pytest.raises(NodesetError, match="no shared nodeset"):
        shared.unload("policy")


def test_a_new_registry_adopts_live_hosts(launcher: SleepLauncher, tmp_path: Path) -> None:
    first = SharedNodesets(launcher, tmp_path / "hosts")
    ns = first.acquire("run-a", part(), {}, None)
    dead = first.acquire("run-a", part(noise=1), {}, None)
    kill_group(dead.hosted.ref.pid)
    launcher.procs[1].wait()
    second = SharedNodesets(launcher, tmp_path / "hosts")
    (adopted,) = second.restore()
    assert adopted.key == ns.key and adopted.refcount == 0
    assert second.hold("run-a", ns.hosted.url) and adopted.refcount == 1


def test_scheduler_hosts_a_shared_nodeset_for_its_runs(
        make_scheduler: Callable[..., JobScheduler], fake_gpus: Callable[[str], None],
        dataset: Path) -> None:
    fake_gpus("1x24576")
    sched = make_scheduler(tick_interval=0.05)
    events: list[Any] = []
    sched.add_listener(events.append)
    spec = line_spec(dataset, episodes=4, marginal_vram_mb=2000, vram_mb=1500, sleep_sec=0.1)
    spec["graph"]["nodesets"]["policy"]["parallelism"] = "shared"
    first, _ = sched.submit(spec)
    second, _ = sched.submit(spec)
    sched.start()
    wait_until(lambda: any(n.refcount == 2 for n in sched.nodesets()), what="two holders")
    wait_until(lambda: all(sched.get_run(r).state is not RunState.QUEUED for r in (first, second)),
               what="both runs spawned")
    (ns,) = sched.nodesets()
    assert ns.origin == "scheduler" and set(ns.holders) == {first, second}
    urls = [read_json(runs_root(sched.outputs) / r / "shared_urls.json") for r in (first, second)]
    assert urls == [{"policy": ns.url}, {"policy": ns.url}]
    with connect(ns.url, host_secret()) as policy:  # the URL really serves the nodeset
        assert policy.call("act", {"obs": {"pos": 0, "goal": 2}}) == {"action": 1}
    wait_until(lambda: any(g.processes and any(p.pid == ns.pid for p in g.processes)
                           for g in sched.resources().gpus), what="the host's VRAM")
    assert any(r.run_id == f"nodeset:{ns.name}" for r in sched.resources().ledger)
    assert sched.wait(first, 30) is RunState.DONE and sched.wait(second, 30) is RunState.DONE
    wait_until(lambda: sched.nodesets() == [], what="the unload")
    wait_until(lambda: not _alive(ns.pid), what="host exit")
    assert any(isinstance(e, NodesetsChanged) and not e.loaded for e in events)
    # The host ran the policy alone, so its measured peak calibrates the policy exactly.
    assert sched.calibration.peak("vram", ns.key) == 1500


def test_interactive_load_through_the_scheduler(
        make_scheduler: Callable[..., JobScheduler], fake_gpus: Callable[[str], None]) -> None:
    fake_gpus("1x24576")
    sched = make_scheduler().start()
    info = sched.load_nodeset("pilot", "sched_nodesets:VramPolicy", {"vram_mb": 700}, gpu=0)
    assert info.origin == "interactive" and info.refcount == 0
    time.sleep(0.3)
    assert [n.name for n in sched.nodesets()] == ["pilot"]  # never auto-unloaded
    gpu0 = sched.resources().gpus[0]
    assert gpu0.used_mb == 700 and gpu0.runs == 1  # its own reservation, not a stranger
    sched.unload_nodeset("pilot")
    assert sched.nodesets() == []
    wait_until(lambda: not _alive(info.pid), what="host exit")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_slow_load_does_not_hold_up_the_scheduler(
        make_scheduler: Callable[..., JobScheduler], fake_gpus: Callable[[str], None],
        dataset: Path) -> None:
    fake_gpus("1x24576")
    slow = SlowLauncher(load_sec=60)
    sched = make_scheduler(nodeset_launcher=slow).start()
    spec = line_spec(dataset, episodes=1, marginal_vram_mb=4000)
    spec["graph"]["nodesets"]["policy"]["parallelism"] = "shared"
    waiting, _ = sched.submit(spec)
    wait_until(lambda: sched.queue() and sched.queue()[0].waiting_kind == "loading",
               what="the loading state")
    assert sched.queue()[0].waiting_reason == "admitted on GPU0; loading shared nodeset policy"
    (pending,) = sched.resources().ledger
    assert pending.pending and pending.run_id == waiting and pending.vram_mb == 4000
    assert sched.resources().gpus[0].reserved_mb == 4000
    other, _ = sched.submit(line_spec(dataset, episodes=1))  # not held up by the load
    assert sched.wait(other, timeout=20) is RunState.DONE
    assert sched.get_run(waiting).state is RunState.QUEUED
    assert read_json(runs_root(sched.outputs) / waiting / "scheduler.json")["pid"] is None
    slow.go.set()
    assert sched.wait(waiting, timeout=20) is RunState.DONE
    urls = read_json(runs_root(sched.outputs) / waiting / "shared_urls.json")
    assert urls["policy"].startswith("evaltui+unix://")
    wait_until(lambda: sched.nodesets() == [], what="the unload after the run")
    slow.go.clear()
    cancelled, _ = sched.submit({**spec, "eval": {**spec["eval"], "episode_count": 2}})
    wait_until(lambda: sched.queue() and sched.queue()[0].waiting_kind == "loading",
               what="the second load")
    assert sched.cancel(cancelled) is RunState.CANCELLED
    slow.go.set()
    wait_until(lambda: sched.nodesets() == [] and not any(
        r.pending for r in sched.resources().ledger), what="the load to be undone")
    assert read_json(runs_root(sched.outputs) / cancelled / "scheduler.json")["pid"] is None
