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
import shutil
import site
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from ledgerhelpers import held_entry, reserve
from schedhelpers import HERE, wait_until, write_dataset

from evaltui.cli import main
from evaltui.rundir import PidRef, read_json, runs_root, state_dir
from evaltui.scheduler.admission.ledger import Ledger

CAPACITY_MB = 24576
RUN_MB = 16000
JOBS = 3
REPO = HERE.parents[1]


def _searchable_by_others(path: Path) -> bool:
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


def _reachable(path: Path, base: Path, mounts: list[Path]) -> Path:
    """``path``, or the same tree bind-mounted under ``base`` where other users cannot
    reach it (under /root: pyenv's interpreter, a venv or checkout made by root)."""
    if _searchable_by_others(path):
        return path
    mounted = base / f"mnt{len(mounts)}"
    mounted.mkdir()
    subprocess.run(["mount", "--bind", str(path), str(mounted)], check=True)
    mounts.append(mounted)
    return mounted


def _python_for_others(base: Path, mounts: list[Path]) -> dict[str, str]:
    """The environment that runs this Python, with this venv's packages and this checkout,
    as another user: EVALTUI_TEST_PYTHON, EVALTUI_TEST_DRIVER, PYTHONPATH and (for
    libpython, which the binary looks for at its absolute build path) LD_LIBRARY_PATH.

    A venv's own ``bin/python`` links to the base interpreter and its ``pyvenv.cfg`` names
    the base's absolute path, so the base binary runs and the venv's site-packages go on
    PYTHONPATH (CI installs into a venv under a root-only checkout).
    """
    prefix = Path(sys.base_prefix).resolve()
    binary = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    seen_prefix = _reachable(prefix, base, mounts)
    repo = _reachable(REPO, base, mounts)  # whole: the helpers find tests/ above them
    here = repo / HERE.relative_to(REPO)
    paths = [repo, here]
    if sys.prefix != sys.base_prefix:
        paths += [_reachable(Path(p), base, mounts)
                  for p in site.getsitepackages() if Path(p).is_dir()]
    env = {
        "EVALTUI_TEST_PYTHON": str(seen_prefix / binary.relative_to(prefix)),
        "EVALTUI_TEST_DRIVER": str(here / "sched_driver.py"),
        "PYTHONPATH": os.pathsep.join(map(str, paths)),
    }
    if seen_prefix != prefix:
        env["LD_LIBRARY_PATH"] = str(seen_prefix / "lib")
    return env


@pytest.fixture
def two_users() -> Iterator[tuple[Path, str, list[str], dict[str, str]]]:
    """(a 0755 base dir, the group, two user names, the env that runs this Python)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd to create two Unix users (shared-ledger test)")
    tag = f"{os.getpid() % 100000}"
    group, users = f"evtg{tag}", [f"evta{tag}", f"evtb{tag}"]
    base = Path(tempfile.mkdtemp(prefix="evaltui-users-", dir="/tmp"))
    os.chmod(base, 0o755)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    made: list[list[str]] = []
    mounts: list[Path] = []
    try:
        env.update(_python_for_others(base, mounts))
        for cmd in (
            ["groupadd", group],
            *(["useradd", "-M", "-N", "-g", group, "-s", "/bin/sh", u] for u in users),
        ):
            subprocess.run(cmd, check=True, capture_output=True)
            made.append(cmd)
        yield base, group, users, env
    finally:
        for cmd in reversed(made):
            undo = ["groupdel", cmd[-1]] if cmd[0] == "groupadd" else ["userdel", cmd[-1]]
            subprocess.run(undo, check=False, capture_output=True)
        for mounted in reversed(mounts):
            subprocess.run(["umount", "-l", str(mounted)], check=False)
        if not any(os.path.ismount(m) for m in mounts):  # never delete through a mount
            shutil.rmtree(base, ignore_errors=True)


def test_two_users_schedulers_share_one_ledger_and_never_overcommit(
    two_users: tuple[Path, str, list[str], dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, group, users, env = two_users
    shared = base / "ledger"
    assert main(["ledger", "setup", "--dir", str(shared), "--group", group]) == 0
    mode = shared.stat()
    assert stat.S_IMODE(mode.st_mode) == 0o2770 and mode.st_gid == grp.getgrnam(group).gr_gid
    dataset = write_dataset(base / "line.jsonl", [1, 1, 1])
    audit = base / "audit.jsonl"
    audit.touch()
    os.chmod(audit, 0o666)
    procs = []
    for user in users:
        home = base / user
        for sub in ("state", "outputs"):
            (home / sub).mkdir(parents=True)
        entry = pwd.getpwnam(user)
        for path in (home, home / "state", home / "outputs"):
            os.chown(path, entry.pw_uid, entry.pw_gid)
        user_env = {
            **env,
            "HOME": str(home),
            "EVALTUI_STATE_DIR": str(home / "state"),
            "EVALTUI_OUTPUTS": str(home / "outputs"),
            "EVALTUI_LEDGER_DIR": str(shared),
            "EVALTUI_LEDGER_AUDIT": str(audit),
            "EVALTUI_FAKE_GPUS": f"1x{CAPACITY_MB}",
        }
        procs.append(
            subprocess.Popen(
                [
                    env["EVALTUI_TEST_PYTHON"],
                    env["EVALTUI_TEST_DRIVER"],
                    "fixed",
                    str(JOBS),
                    str(RUN_MB),
                    "0.4",
                    str(dataset),
                ],
                env=user_env,
                user=user,
                group=group,
                extra_groups=[],
                start_new_session=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=str(home),
            )
        )
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
    with ledger.transaction():
        pass  # purges what the last runs left (their holders are dead), into the audit too

    # Every change of the one ledger, in lock order, by both users: never over the GPU.
    held: dict[str, int] = {}
    uids, admits, peak = set(), 0, 0
    for line in audit.read_bytes().splitlines():
        op = orjson.loads(line)
        if op["op"] == "admit":
            held[op["key"]] = op["vram_mb"]
            admits += 1
            uids.add(op["uid"])
        else:
            held.pop(op["key"])
        peak = max(peak, sum(held.values()))
        assert sum(held.values()) <= CAPACITY_MB, f"over-committed at {op}"
    assert admits == 2 * JOBS and held == {} and peak == RUN_MB
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
    assert stat.S_IMODE((shared / "ledger.json").stat().st_mode) == 0o660


def test_other_users_reservations_are_read_marked_and_never_released_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "ledger"
    shared.mkdir()
    monkeypatch.setenv("EVALTUI_LEDGER_DIR", str(shared))
    ledger = Ledger()
    assert ledger.shared and ledger.directory == shared
    other = os.getuid() + 4242
    theirs = held_entry("their-run", vram_mb=8000, uid=other)
    gone = held_entry("their-dead-run", holder=PidRef(4_000_001, 1.0), vram_mb=8000, uid=other)
    reserve(ledger, theirs, gone, "my-run")
    # A dead holder's entry is purged by anyone; a live one of another user stays.
    with ledger.transaction() as txn:
        assert {r.run_id for r in txn.entries} == {"their-run", "my-run"}
        with pytest.raises(PermissionError, match=f"uid {other}"):
            txn.remove(theirs.key)
    assert {r.run_id: r.mine for r in ledger.entries()} == {"their-run": False, "my-run": True}
    data = read_json(shared / "ledger.json")
    assert {e["run_id"]: e["uid"] for e in data["entries"].values()} == {
        "their-run": other,
        "my-run": os.getuid(),
    }
    assert stat.S_IMODE((shared / "ledger.json").stat().st_mode) == 0o660


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
