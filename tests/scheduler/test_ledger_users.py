"""One reservation ledger per machine, shared by every Unix user's schedulers (DESIGN §12).

The two-user test creates a group and two real users (root only; skipped with one line
elsewhere), sets the shared ledger up with ``evaltui ledger setup``, and runs one
scheduler process as each user on the same fake 24 GiB GPU, 3 jobs of 16,000 MiB each:
the audit of every ledger change, and the times the runs really lived, must never show
two of them at once.
"""

from __future__ import annotations

import grp
import logging
import os
import pwd
import stat
import subprocess
from pathlib import Path

import orjson
import pytest
from ledgerhelpers import held_entry, reserve
from schedhelpers import wait_until, write_dataset
from unixusers import start_driver

from evaltui.cli import main
from evaltui.contract.pidref import PidRef
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root, state_dir
from evaltui.scheduler.admission.ledger import Ledger

CAPACITY_MB = 24576
RUN_MB = 16000
JOBS = 3


def test_two_users_schedulers_share_one_ledger_and_never_overcommit(
    two_users: tuple[Path, str, list[str], dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, group, users, env = two_users
    shared = base / "ledger"
    assert main(["ledger", "setup", "--dir", str(shared), "--group", group]) == 0
    mode = shared.stat()
    assert stat.S_IMODE(mode.st_mode) == 0o3770 and mode.st_gid == grp.getgrnam(group).gr_gid
    dataset = write_dataset(base / "line.jsonl", [1, 1, 1])
    audit = base / "audit.jsonl"
    audit.touch()
    os.chmod(audit, 0o666)
    procs = [start_driver(base, user, group, env, shared,
                          ["fixed", str(JOBS), str(RUN_MB), "0.4", str(dataset)],
                          EVALTUI_LEDGER_AUDIT=str(audit)) for user in users]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err.decode()[-2000:]
        assert set(orjson.loads(out).values()) == {"done"}

    monkeypatch.setenv("EVALTUI_LEDGER_DIR", str(shared))
    ledger = Ledger(audit_path=audit)
    for r in ledger.entries():  # a last run may still be exiting after its _DONE
        wait_until(
            lambda r=r: not PidRef(r.holder_pid, r.holder_create_time).alive(),
            what=f"holder {r.holder_pid} to exit",
        )
    assert ledger.entries() == []  # what the last runs left is counted by nobody

    # Every change of the ledger, in lock order, by both users, with what it held after
    # (a dead holder's entry is counted by nobody, though only its owner purges it).
    uids, admits, peak = set(), 0, 0
    for line in audit.read_bytes().splitlines():
        op = orjson.loads(line)
        reserved = sum(op["reserved_after_txn"].values())
        if op["op"] == "admit":
            admits += 1
            uids.add(op["uid"])
        peak = max(peak, reserved)
        assert reserved <= CAPACITY_MB, f"over-committed at {op}"
    assert admits == 2 * JOBS and peak == RUN_MB
    assert uids == {pwd.getpwnam(u).pw_uid for u in users}  # both wrote to the same ledger
    # What really ran at once, across both users' outputs: one 16,000 MiB run at a time.
    events = []
    for user in users:
        for run_dir in runs_root(base / user / "outputs").iterdir():
            events.append((float((run_dir / "started").read_text()), 1))
            events.append((float((run_dir / "ended").read_text()), -1))
    live = 0
    for _, delta in sorted(events):
        live += delta
        assert live <= 1
    for user in users:  # one file per user, owned by it: the others read it, never write
        st = (shared / f"u{pwd.getpwnam(user).pw_uid}.json").stat()
        assert st.st_uid == pwd.getpwnam(user).pw_uid and stat.S_IMODE(st.st_mode) == 0o640
    assert stat.S_IMODE(shared.stat().st_mode) & stat.S_ISVTX


def _as_user(uid: int) -> None:
    os.setgid(uid)  # a made-up uid and gid: no name needed to run as it
    os.setuid(uid)


def _write_as(uid: int, path: Path, entries: list[dict]) -> None:
    """Write ``entries`` as a ledger file owned by ``uid`` (root: as that user)."""
    path.write_bytes(orjson.dumps({"version": 2, "entries": entries}))
    os.chown(path, uid, uid)


def test_other_users_reservations_are_theirs_by_file_owner_not_by_what_they_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to write a ledger file as another user")
    shared = tmp_path / "ledger"
    shared.mkdir()
    os.chmod(shared, 0o3777)
    monkeypatch.setenv("EVALTUI_LEDGER_DIR", str(shared))
    ledger = Ledger()
    assert ledger.shared and ledger.directory == shared
    other = os.getuid() + 4242
    theirs = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: _as_user(other))
    try:
        holder = PidRef.of(theirs.pid)
        their_run = held_entry("their-run", holder=holder, vram_mb=8000, uid=os.getuid())
        gone = held_entry("their-dead-run", holder=PidRef(4_000_001, 1.0), vram_mb=8000)
        forged = held_entry("forged", holder=PidRef.of(1), vram_mb=24000)
        # Their file says uid root for every entry: the kernel says whose file it is.
        _write_as(other, shared / f"u{other}.json",
                  [e.model_dump() for e in (their_run, gone, forged)])
        reserve(ledger, "my-run")
        with ledger.transaction() as txn:
            # A dead holder's entry is counted by nobody, pid 1 is not theirs to name.
            assert {r.run_id: r.uid for r in txn.entries} == {"their-run": other,
                                                             "my-run": os.getuid()}
            with pytest.raises(PermissionError, match=f"uid {other}"):
                txn.remove(their_run.key)
        assert {r.run_id: r.mine for r in ledger.entries()} == {"their-run": False,
                                                               "my-run": True}
        mine = read_json(shared / f"u{os.getuid()}.json")
        assert [e["run_id"] for e in mine["entries"]] == ["my-run"]  # theirs stays theirs
        assert stat.S_IMODE((shared / f"u{os.getuid()}.json").stat().st_mode) == 0o640
    finally:
        theirs.kill()
        theirs.wait()


def test_without_the_shared_ledger_it_is_per_user_and_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("EVALTUI_LEDGER_DIR", str(tmp_path / "not-set-up"))
    with caplog.at_level(logging.WARNING, logger="evaltui.scheduler.admission.ledgerdir"):
        first, second = Ledger(), Ledger()
    assert first.directory == second.directory == state_dir() and not first.shared
    said = [r.getMessage() for r in caplog.records if "per-user" in r.getMessage()]
    assert len(said) == 1 and str(tmp_path / "not-set-up") in said[0]
    assert "is not set up" in said[0] and "evaltui ledger setup" in said[0]
