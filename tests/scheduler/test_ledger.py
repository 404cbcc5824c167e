"""Ledger (real flock, real PIDs), accounting against measured usage, calibration, lock."""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from ledgerhelpers import held_entry, reserve
from schedhelpers import line_spec

from evaltui.contract.pidref import PidRef
from evaltui.contract.spec import parse_spec
from evaltui.contract.views import LedgerEntry
from evaltui.scheduler.admission.accounting import RssCache, account
from evaltui.scheduler.admission.calibration import Calibration, nodeset_parts
from evaltui.scheduler.admission.ledger import Ledger, LedgerNotDurable
from evaltui.scheduler.admission.ledgerfiles import LOCK_WAIT_SEC
from evaltui.scheduler.admission.resources import (
    GpuReading,
    GpuSnapshot,
    HostSnapshot,
    ProcessUsage,
    ResourceSnapshot,
)
from evaltui.scheduler.lock import InteractiveLock, LockHeldError


def reservation(ref: PidRef, run_id: str = "r", gpu: int | None = 0, mb: int = 1000,
                ram: int = 0, exclusive: bool = False) -> LedgerEntry:
    return LedgerEntry(run_id=run_id, holder_pid=ref.pid, holder_create_time=ref.create_time,
                       scheduler_pid=1, outputs="/out", gpu=gpu, vram_mb=mb, ram_mb=ram,
                       exclusive=exclusive, admitted_at=time.time())


@pytest.fixture
def sleeper(popen: Callable[..., subprocess.Popen[bytes]]) -> Callable[[], PidRef]:
    def start() -> PidRef:
        return PidRef.of(popen(["sleep", "600"]).pid)
    return start


def test_reservations_persist_and_die_with_their_holder(
        tmp_path: Path, sleeper: Callable[[], PidRef]) -> None:
    audit = tmp_path / "audit.jsonl"
    ledger = Ledger(tmp_path / "state", audit_path=audit)
    a, b = sleeper(), sleeper()
    with ledger.transaction() as txn:
        txn.add(reservation(a, "run-a", mb=4000))
        txn.add(reservation(b, "run-b", mb=2000))
    assert {r.run_id for r in Ledger(tmp_path / "state").entries()} == {"run-a", "run-b"}
    subprocess.run(["kill", "-9", str(a.pid)], check=True)
    time.sleep(0.1)
    with ledger.transaction() as txn:
        assert [r.run_id for r in txn.entries] == ["run-b"]  # purged: holder is dead
        txn.remove(reservation(b, "run-b").key)
    assert ledger.entries() == []
    ops = [orjson.loads(line) for line in audit.read_bytes().splitlines()]
    assert [(o["op"], o["run_id"]) for o in ops] == [
        ("admit", "run-a"), ("admit", "run-b"), ("purge", "run-a"), ("release", "run-b")]
    assert ops[1]["reserved_after_txn"] == {"0": 6000}


def test_a_reused_pid_does_not_keep_a_reservation(tmp_path: Path,
                                                  sleeper: Callable[[], PidRef]) -> None:
    ledger = Ledger(tmp_path)
    live = sleeper()
    with ledger.transaction() as txn:
        txn.add(reservation(PidRef(live.pid, live.create_time - 100), "impostor"))
    with ledger.transaction() as txn:
        assert txn.entries == []


@pytest.mark.parametrize("damage", ["{not json", "{", "[]", '{"version": 2, "entries": [1]}',
                                    "a directory", "a link"])
def test_a_damaged_ledger_is_a_wait_with_its_reason_never_an_empty_ledger(
        tmp_path: Path, damage: str) -> None:
    ledger = Ledger(tmp_path)
    reserve(ledger, "held")
    path = ledger.path
    if damage == "a directory":
        path.unlink()
        path.mkdir()
    elif damage == "a link":
        path.unlink()
        path.symlink_to(tmp_path / "elsewhere.json")
    else:
        path.write_text(damage)
    with ledger.transaction() as txn:
        assert txn.blocked is not None and str(path) in txn.blocked
        txn.add(held_entry("next"))  # what the tick would do: refused, nothing stored
    assert ledger.error is not None and "damaged" in ledger.error
    with pytest.raises(LedgerNotDurable, match="damaged"):
        with ledger.transaction() as txn:
            ledger.flush(txn)
    assert path.is_dir() or path.is_symlink() or path.read_text() == damage  # left as found


def test_a_lock_held_elsewhere_or_replaced_blocks_admission_within_its_bound(
        tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    reserve(ledger, "held")
    fd = os.open(ledger.lock_path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # by hand, as another user of the group could
        started = time.monotonic()
        assert [r.run_id for r in ledger.entries()] == ["held"]  # reads never wait
        with ledger.transaction() as txn:
            waited = time.monotonic() - started
            assert txn.blocked is not None and "is held by pid" in txn.blocked
        assert waited < LOCK_WAIT_SEC + 1.0 and ledger.error == txn.blocked
    finally:
        os.close(fd)
    ledger.lock_path.unlink()
    ledger.lock_path.mkdir()  # a directory where the lock should be
    with ledger.transaction() as txn:
        assert txn.blocked is not None and str(ledger.lock_path) in txn.blocked
        assert [r.run_id for r in txn.entries] == ["held"]
    ledger.lock_path.rmdir()
    with ledger.transaction() as txn:
        assert txn.blocked is None
        ledger.flush(txn)
    assert ledger.error is None


def test_an_old_single_file_ledger_is_still_read_never_written(tmp_path: Path) -> None:
    live, dead = held_entry("old-live"), held_entry("old-dead", holder=PidRef(4_000_001, 1.0))
    legacy = tmp_path / "ledger.json"  # as an evaltui before per-user files wrote it
    legacy.write_bytes(orjson.dumps({"version": 1, "entries": {
        e.key: {**e.model_dump(), "uid": 12345} for e in (live, dead)}}))  # a uid it said
    ledger = Ledger(tmp_path)
    # Counted while its holder lives, as the holder's owner's (the kernel's word).
    assert [(r.run_id, r.uid) for r in ledger.entries()] == [("old-live", os.getuid())]
    reserve(ledger, "new")
    assert {r.run_id for r in ledger.entries()} == {"old-live", "new"}
    assert orjson.loads(legacy.read_bytes())["version"] == 1  # left as it was


def snapshot(processes: tuple[ProcessUsage, ...] | None, used: int, total: int = 24576
             ) -> ResourceSnapshot:
    g = GpuSnapshot(0, "g", total, used, total - used, None, processes)
    host = HostSnapshot(65536, 60000, 0.0, 8, None)
    return ResourceSnapshot(GpuReading(True, None, True, (g,)), host, time.time())


def test_reservation_counts_only_what_its_processes_do_not_use_yet(
        sleeper: Callable[[], PidRef]) -> None:
    run, other = sleeper(), sleeper()
    entries = [reservation(run, "run", mb=10000, ram=500)]
    rss = RssCache(measure=lambda pid: 200.0)
    # The run's process already holds 6000 of its 10000: only 4000 stay outstanding.
    acct = account(entries, snapshot((ProcessUsage(run.pid, 6000),), 6000), rss)
    (view,) = acct.gpus or ()
    assert (view.free_mb, view.outstanding_mb, view.available_mb) == (18576, 4000, 14576)
    assert view.runs == 1 and view.foreign == 0
    assert acct.usage[entries[0].key].vram_mb == 6000
    assert acct.host.outstanding_mb == 300  # 500 reserved, 200 resident
    # Usage of a process no reservation accounts for is foreign, and counts as a run.
    acct = account(entries, snapshot((ProcessUsage(other.pid, 3000),), 3000), rss)
    (view,) = acct.gpus or ()
    assert view.outstanding_mb == 10000 and view.foreign == 1 and view.runs == 2
    # Without per-process usage the reservation counts whole.
    acct = account(entries, snapshot(None, 6000), rss)
    (view,) = acct.gpus or ()
    assert view.outstanding_mb == 10000
    assert acct.usage[entries[0].key].vram_mb is None


def test_calibration_learns_per_nodeset_and_estimates(tmp_path: Path, dataset: Path) -> None:
    cal = Calibration(tmp_path)
    spec = parse_spec(line_spec(dataset, marginal_vram_mb=3000, vram_mb=4000))
    parts = nodeset_parts(spec)
    est = cal.estimate(spec, parts)
    assert (est.vram_mb, est.source, est.needs_gpu) == (3000, "declared", True)
    # Env known (0 MiB from an earlier run), policy unknown: the policy gets the rest.
    env = next(p for p in parts if p.name == "env")
    cal.record_nodeset("vram", env, 0)
    cal.record_run("vram", parts, 4096)
    est = Calibration(tmp_path).estimate(spec, parts)  # another scheduler reads the file
    assert (est.vram_mb, est.source) == (4096, "calibrated")
    assert est.per_nodeset_mb == {"env": 0, "policy": 4096}
    # Replicas multiply a replicated nodeset's peak.
    cal.record_run("vram", parts, 4096 + 0)
    many = parse_spec({**line_spec(dataset, vram_mb=4000), "eval": {
        "dataset": str(dataset), "worker_count": 4}})
    cal.record_nodeset("vram", next(p for p in nodeset_parts(many) if p.name == "env"), 100)
    assert cal.estimate(many, nodeset_parts(many)).vram_mb == 4096 + 4 * 100
    # A shared nodeset already loaded counts ~0.
    shared = parse_spec(line_spec(dataset, vram_mb=4000))
    shared.graph["nodesets"]["policy"]["parallelism"] = "shared"
    sparts = nodeset_parts(shared)
    policy_key = next(p.key for p in sparts if p.name == "policy")
    assert cal.estimate(shared, sparts, loaded_shared={policy_key}).vram_mb == 100


def test_calibration_keeps_the_max_of_recent_samples(tmp_path: Path, dataset: Path) -> None:
    cal = Calibration(tmp_path)
    spec = parse_spec(line_spec(dataset, vram_mb=1))
    parts = nodeset_parts(spec)[1:]  # the policy alone
    for peak in (5000, 3000, 3000):
        cal.record_run("vram", parts, peak)
    assert cal.peak("vram", parts[0].key) == 5000


def test_interactive_lock(tmp_path: Path) -> None:
    lock, other = InteractiveLock(tmp_path), InteractiveLock(tmp_path)
    info = lock.acquire("alice", ttl_sec=60)
    assert other.current() == info
    with pytest.raises(LockHeldError, match="interactive lock held by alice until"):
        other.acquire("bob", ttl_sec=60)
    again = lock.acquire("alice", ttl_sec=120)  # the holder extends it
    assert again.acquired_at == info.acquired_at and again.expires_at > info.expires_at
    assert not other.release("bob") and other.current() is not None
    assert lock.release("alice") and other.current() is None
    lock.acquire("alice", ttl_sec=0.05)
    time.sleep(0.1)
    assert other.current() is None  # expired by itself
    assert other.acquire("bob", ttl_sec=60).owner == "bob"
    with pytest.raises(ValueError):
        lock.acquire("", 10)
