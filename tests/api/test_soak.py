"""Soak: three ``evaltui serve`` backends on one outputs root, state dir and fake GPU; jobs
run while runs, workers and backends are SIGKILLed at random (seeded, bounded), killed
backends are restarted, then every run that did not end ``done`` with every episode ok
is resumed. Then:

- every episode ended exactly once: one episode.json per index, ``ok``, and one
  ``episode_start``/``episode_end`` in its log (no two processes ran it into one dir);
- no orphans: every process seen (backends, runs, workers, nodeset hosts, tracked by PID
  and create time) is gone once the backends are stopped;
- no over-commit: the ledger's audit log never holds more than the GPU at any point;
- the ledger is empty at the end; a SIGKILLed run reads ``aborted``, never ``failed``.

Where it runs as root (issue 24), the outputs root and the state dir are small tmpfs
mounts, and the chaos also fills the outputs disk for 2 s and the state dir for 2 s
(every write there fails: the ledger cannot be stored, so nothing may be admitted); the
same checks then hold.

The short form runs in the default suite; ``pytest -m soak`` runs 200 jobs. Its counts
are in docs/performance.md ("Reliability").
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from fulldisk import SmallDisk
from ports import free_ports
from soakhelpers import TERMINAL, Backends, Tracker, job_spec

from evaltui.contract.pidref import PidRef
from evaltui.rundir.layout import runs_root
from evaltui.rundir.logread import read_log
from evaltui.scheduler.admission.ledger import Ledger

CAPACITY_MB = 24576


@dataclass(frozen=True)
class Plan:
    jobs: int
    episodes: int
    run_kills: int
    worker_kills: int
    backend_kills: int
    seed: int
    timeout: float


@dataclass
class Tally:
    killed: dict[str, int] = field(default_factory=lambda: {"run": 0, "worker": 0, "backend": 0,
                                                            "disk": 0, "state": 0})
    killed_runs: list[str] = field(default_factory=list)
    restarts: int = 0
    states_before_resume: dict[str, int] = field(default_factory=dict)
    notes_before_resume: dict[str, int] = field(default_factory=dict)
    """Why the runs that did not end ``done`` ended so (their ``error`` note), counted."""
    resumed: int = 0
    resume_rounds: int = 0
    episodes: int = 0
    processes_seen: dict[str, int] = field(default_factory=dict)
    orphans: dict[str, list[int]] = field(default_factory=dict)
    admits: int = 0
    peak_reserved_mb: int = 0
    seconds: float = 0.0


SHORT = Plan(jobs=18, episodes=4, run_kills=3, worker_kills=3, backend_kills=2, seed=1,
             timeout=240)
LONG = Plan(jobs=200, episodes=4, run_kills=25, worker_kills=25, backend_kills=8, seed=2,
            timeout=900)



FAULT_SEC = 2.0
"""How long the outputs disk, and then the state dir, stay full."""


@dataclass
class Disks:
    """The soak's outputs and state dir as small tmpfs mounts (None where not root)."""

    outputs: SmallDisk | None = None
    state: SmallDisk | None = None


def mount_disks(maybe_small_disk: Callable[..., SmallDisk | None],
                api_env: dict[str, Path]) -> Disks:
    """Mount the tmpfs over the (empty) outputs and state dirs of ``api_env``."""
    outputs = maybe_small_disk(api_env["outputs"].name, "512m")
    state = maybe_small_disk(api_env["state"].name, "64m") if outputs is not None else None
    assert outputs is None or outputs.path == api_env["outputs"]
    assert state is None or state.path == api_env["state"]
    return Disks(outputs, state)


def soak(plan: Plan, popen: Callable[..., Any], api_env: dict[str, Path], tmp_path: Path,
         disks: Disks | None = None) -> Tally:
    disks = disks or Disks()
    started = time.monotonic()
    deadline = started + plan.timeout
    rng = random.Random(plan.seed)
    audit = tmp_path / "audit.jsonl"
    env = {**os.environ, "EVALTUI_LEDGER_AUDIT": str(audit),
           "EVALTUI_FAKE_GPUS": f"1x{CAPACITY_MB}"}
    backends = Backends(popen, free_ports(3), api_env["outputs"], env, tmp_path)
    tracker = Tracker(api_env["outputs"], api_env["state"])
    tally = Tally()
    for i in range(3):
        backends.start(i)
    tracker.start()
    ids = []
    for n in range(plan.jobs):  # round robin over the backends, all queued up front
        answer = backends.call("POST", "/runs", job_spec(n, rng, plan.episodes), n % 3)
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["run_id"])

    _chaos(plan, rng, backends, tracker, tally, ids, deadline, disks)
    states = _wait_terminal(backends, ids, deadline)
    tally.states_before_resume = _count(states.values())
    tally.notes_before_resume = _count(_notes(backends, ids, states))
    for run_id in tally.killed_runs:  # a SIGKILLed run is aborted, never failed
        assert states[run_id] in ("aborted", "done"), (run_id, states[run_id])
    _resume_all(plan, backends, ids, states, tally, deadline)

    backends.stop_all()
    tracker.stop()
    time.sleep(1.0)
    end = time.monotonic() + 15  # hosts check their holders once a second
    while tracker.survivors() and time.monotonic() < end:
        time.sleep(0.2)
    tally.orphans = tracker.survivors()
    tally.processes_seen = _count(tracker.seen.values())
    tally.processes_seen["backend"] = len(backends.refs)
    tally.orphans.update({"backend": [r.pid for r in backends.refs if r.alive()]} if any(
        r.alive() for r in backends.refs) else {})
    _check_episodes(plan, api_env["outputs"], ids, tally)
    _check_audit(audit, tally)
    ledger = Ledger()
    live = [r for r in ledger.entries()
            if PidRef(r.holder_pid, r.holder_create_time).alive()]
    assert live == [], "a live holder is still reserved"
    with ledger.transaction():
        pass  # purges what the killed holders left
    assert ledger.entries() == []
    tally.seconds = round(time.monotonic() - started, 1)
    print("SOAK", json.dumps(asdict(tally), default=str))
    return tally


def _chaos(plan: Plan, rng: random.Random, backends: Backends, tracker: Tracker,
           tally: Tally, ids: list[str], deadline: float, disks: Disks) -> None:
    """Kill runs, workers and backends at random moments until the budget is spent; fill
    the outputs disk and the state dir meanwhile, once each, where mounted."""
    budget = {"run": plan.run_kills, "worker": plan.worker_kills,
              "backend": plan.backend_kills}
    faults = threading.Thread(target=_disk_faults, args=(disks, tracker, tally), daemon=True)
    faults.start()
    restarts: list[tuple[float, int]] = []
    while any(budget.values()) and time.monotonic() < deadline:
        time.sleep(rng.uniform(0.2, 0.6))
        for due, i in [r for r in restarts if r[0] <= time.monotonic()]:
            backends.start(i)
            restarts.remove((due, i))
            tally.restarts += 1
        kind = rng.choice(sorted(k for k, v in budget.items() if v))
        if kind == "backend":
            alive = backends.alive()
            if len(alive) < 2:
                continue  # keep one serving: the chaos is in the processes, not the API
            i = rng.choice(alive)
            backends.kill(i)
            restarts.append((time.monotonic() + rng.uniform(0.5, 2.0), i))
        else:
            tracker.sample()
            pool = sorted(tracker.live_runs.items()) if kind == "run" else \
                [(None, w) for w in sorted(tracker.live_workers, key=lambda r: r.pid)]
            if not pool:
                if not tracker.live_runs and _all_terminal(backends, ids):
                    break  # nothing left to kill
                continue
            run_id, ref = rng.choice(pool)
            if not ref.alive():
                continue
            os.kill(ref.pid, signal.SIGKILL)
            if run_id is not None:
                tally.killed_runs.append(run_id)
        budget[kind] -= 1
        tally.killed[kind] += 1
    for _due, i in restarts:
        backends.start(i)
        tally.restarts += 1
    faults.join()


def _disk_faults(disks: Disks, tracker: Tracker, tally: Tally) -> None:
    """Beside the kills: once a run runs (or after 5 s), the outputs disk full for
    FAULT_SEC, then a second later the state dir full for FAULT_SEC. (Not a read-only
    remount of the state dir: the kernel refuses it while files are open for writing,
    as the ledger's lock is.)"""
    for kind, disk in (("disk", disks.outputs), ("state", disks.state)):
        if disk is None:
            continue
        end = time.monotonic() + 5.0
        while not tracker.live_runs and time.monotonic() < end:
            time.sleep(0.05)
        disk.fill()
        time.sleep(FAULT_SEC)  # the fault itself: nothing can be written for this long
        disk.free()
        tally.killed[kind] += 1
        time.sleep(1.0)


def _states(backends: Backends) -> dict[str, str]:
    answer = backends.call("GET", "/runs")
    assert answer.status_code == 200, answer.text
    return {r["run_id"]: r["state"] for r in answer.json()}


def _notes(backends: Backends, ids: list[str], states: dict[str, str]) -> list[str]:
    """``state: note`` of every run that did not end done (the note cut to its gist)."""
    out = []
    for run_id in ids:
        if states[run_id] == "done":
            continue
        run = backends.call("GET", f"/runs/{run_id}").json()
        note = str(run.get("error") or (run.get("summary") or {}).get("error") or "")
        out.append(f"{states[run_id]}: {note.split(';')[0].split(' (episode')[0][:80]}")
    return out


def _all_terminal(backends: Backends, ids: list[str]) -> bool:
    states = _states(backends)
    return all(states.get(r) in TERMINAL for r in ids)


def _wait_terminal(backends: Backends, ids: list[str], deadline: float) -> dict[str, str]:
    while True:
        states = _states(backends)
        if all(states.get(r) in TERMINAL for r in ids):
            return {r: states[r] for r in ids}
        assert time.monotonic() < deadline, _count(states.values())
        time.sleep(0.3)


def _not_ok(outputs: Path, run_id: str, episodes: int) -> list[int]:
    ep_root = runs_root(outputs) / run_id / "episodes"
    bad = []
    for i in range(episodes):
        try:
            row = json.loads((ep_root / f"ep{i:04d}" / "episode.json").read_text())
        except (OSError, ValueError):
            bad.append(i)
            continue
        if row.get("status") != "ok":
            bad.append(i)
    return bad


def _resume_all(plan: Plan, backends: Backends, ids: list[str], states: dict[str, str],
                tally: Tally, deadline: float) -> None:
    outputs = backends.outputs
    for _round in range(4):
        todo = [r for r in ids if _not_ok(outputs, r, plan.episodes)]
        if not todo:
            return
        tally.resume_rounds += 1
        for run_id in todo:
            answer = backends.call("POST", f"/runs/{run_id}/resume")
            assert answer.status_code == 200, (run_id, states.get(run_id), answer.text)
            tally.resumed += 1
        _wait_terminal(backends, ids, deadline)
    raise AssertionError(f"episodes still not ok after 4 rounds of resume: {todo}")


def _check_episodes(plan: Plan, outputs: Path, ids: list[str], tally: Tally) -> None:
    """One episode.json per index, ok; one start and one end in each log."""
    assert sorted(p.name for p in runs_root(outputs).iterdir()) == sorted(ids)
    for run_id in ids:
        ep_root = runs_root(outputs) / run_id / "episodes"
        assert sorted(p.name for p in ep_root.iterdir()) == \
            [f"ep{i:04d}" for i in range(plan.episodes)], run_id
        assert _not_ok(outputs, run_id, plan.episodes) == [], run_id
        for i in range(plan.episodes):
            records, _ = read_log(ep_root / f"ep{i:04d}" / "log.jsonl")
            events = [r.get("event") for _, r in records]
            assert events.count("episode_start") == 1 and events.count("episode_end") == 1, \
                (run_id, i, _count(events))
            tally.episodes += 1


def _check_audit(audit: Path, tally: Tally) -> None:
    held: dict[str, int] = {}
    for line in audit.read_bytes().splitlines():
        op = orjson.loads(line)
        if op["op"] == "admit":
            held[op["key"]] = op["vram_mb"]
            tally.admits += 1
        else:
            held.pop(op["key"], None)
        total = sum(held.values())
        tally.peak_reserved_mb = max(tally.peak_reserved_mb, total)
        assert total <= CAPACITY_MB, f"over-committed at {op}"


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return out


def _check(tally: Tally, plan: Plan, disks: Disks | None = None) -> None:
    if disks is not None:
        assert tally.killed["disk"] == int(disks.outputs is not None)
        assert tally.killed["state"] == int(disks.state is not None)
    assert tally.orphans == {}, tally.orphans
    assert tally.episodes == plan.jobs * plan.episodes
    assert tally.killed["backend"] == plan.backend_kills and tally.restarts == plan.backend_kills
    assert tally.killed["run"] >= 1 and tally.killed["worker"] >= 1, tally.killed
    assert tally.peak_reserved_mb > CAPACITY_MB // 2  # the GPU really was contended


def test_soak_short(popen: Callable[..., Any], api_env: dict[str, Path],
                    tmp_path: Path, maybe_small_disk: Callable[..., SmallDisk | None]) -> None:
    disks = mount_disks(maybe_small_disk, api_env)
    _check(soak(SHORT, popen, api_env, tmp_path, disks), SHORT, disks)


@pytest.mark.soak
def test_soak_200_jobs(popen: Callable[..., Any], api_env: dict[str, Path],
                       tmp_path: Path, maybe_small_disk: Callable[..., SmallDisk | None]
                       ) -> None:
    disks = mount_disks(maybe_small_disk, api_env)
    _check(soak(LONG, popen, api_env, tmp_path, disks), LONG, disks)
