"""The shared ledger holds against a member of its group, not only against evaltui's API.

Two real Unix users (root only; skipped with one line elsewhere) each run a scheduler on
the same fake 24 GiB GPU, jobs of 16,000 MiB each, so two at once would over-commit it.
Meanwhile the second user attacks the ledger by hand: deletes, empties, edits and replaces
the first user's file, replaces the lock, damages their own file (``{``), forges an
exclusive entry held by pid 1, and holds the admission lock. The kernel refuses what
touches the other user's reservations; the rest is a wait with its reason. The runs never
overlap, every job ends ``done``, and the first user's API answers every request, each
within 2 s, with the reason shown while it waits.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import subprocess
import time
import urllib.request
from pathlib import Path

import orjson
from ports import free_port
from schedhelpers import wait_until, write_dataset
from unixusers import start_driver

from evaltui.api.models import API_PREFIX
from evaltui.cli import main
from evaltui.rundir.layout import runs_root

RUN_MB = 16000
JOBS = 6
HOLD_SEC = "0.4"
API_BOUND_SEC = 2.0

ATTACK = r"""
import errno, fcntl, json, os, sys, time
import psutil
shared, victim = sys.argv[1], int(sys.argv[2])
me = os.getuid()
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "done"
    except OSError as exc:
        out[name] = errno.errorcode[exc.errno]
theirs = os.path.join(shared, f"u{victim}.json")
lock = os.path.join(shared, "ledger.lock")
def rename_over():
    tmp = os.path.join(shared, ".mine.tmp")
    with open(tmp, "w") as f:
        f.write('{"version": 2, "entries": []}')
    try:
        os.replace(tmp, theirs)
    finally:
        os.unlink(tmp)
attempt("delete theirs", lambda: os.unlink(theirs))
attempt("empty theirs", lambda: open(theirs, "w").close())
attempt("edit theirs", lambda: open(theirs, "r+").write("{"))
attempt("rename over theirs", rename_over)
attempt("replace the lock", lambda: os.unlink(lock))
mine = os.path.join(shared, f"u{me}.json")
own_lock = os.open(os.path.join(shared, f"u{me}.lock"), os.O_RDONLY)
def own_file(change):
    # Under this user's own lock, so its scheduler's stores are not lost in between.
    fcntl.flock(own_lock, fcntl.LOCK_EX)
    try:
        before = open(mine, "rb").read() if os.path.exists(mine) else b""
        with open(mine, "wb") as f:
            f.write(change(before))
        return before
    finally:
        fcntl.flock(own_lock, fcntl.LOCK_UN)
saved = own_file(lambda before: b"{")
print("damaged", flush=True)
time.sleep(1.5)
def forge(before):
    data = json.loads(saved) if saved else {"version": 2, "entries": []}
    data["entries"].append({"run_id": "forged", "holder_pid": 1,
                            "holder_create_time": psutil.Process(1).create_time(),
                            "scheduler_pid": 1, "outputs": "/", "gpu": 0,
                            "vram_mb": 24576, "ram_mb": 0, "exclusive": True})
    return json.dumps(data).encode()
own_file(forge)
print("forged", flush=True)
fd = os.open(lock, os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(4)
os.close(fd)
print(json.dumps(out), flush=True)
"""


def _get(url: str, token: str) -> tuple[int, float, dict]:
    started = time.monotonic()
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, body = response.status, orjson.loads(response.read())
    except urllib.error.HTTPError as exc:
        status, body = exc.code, {}
    return status, time.monotonic() - started, body


def test_a_group_member_editing_emptying_forging_or_locking_the_ledger_by_hand(
    two_users: tuple[Path, str, list[str], dict[str, str]]
) -> None:
    base, group, (victim, attacker), env = two_users
    shared = base / "ledger"
    assert main(["ledger", "setup", "--dir", str(shared), "--group", group]) == 0
    dataset = write_dataset(base / "line.jsonl", [1, 1, 1])
    port, token = free_port(), secrets.token_hex(16)
    drivers = [
        start_driver(base, victim, group, env, shared,
                     ["fixed", str(JOBS), str(RUN_MB), HOLD_SEC, str(dataset)],
                     SCHED_DRIVER_PORT=str(port), SCHED_DRIVER_TOKEN=token),
        start_driver(base, attacker, group, env, shared,
                     ["fixed", str(JOBS), str(RUN_MB), HOLD_SEC, str(dataset)]),
    ]
    victim_uid = pwd.getpwnam(victim).pw_uid
    url = f"http://127.0.0.1:{port}{API_PREFIX}/resources"
    attack = None
    try:
        wait_until(lambda: (shared / f"u{victim_uid}.json").exists()
                   and (shared / f"u{pwd.getpwnam(attacker).pw_uid}.lock").exists(),
                   timeout=60, what="both schedulers to have stored in the ledger")
        attack = subprocess.Popen(
            [env["EVALTUI_TEST_PYTHON"], "-c", ATTACK, str(shared), str(victim_uid)],
            env={**env, "HOME": str(base)}, user=attacker, group=group, extra_groups=[],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(base))
        answers = []
        while attack.poll() is None:
            answers.append(_get(url, token))
            time.sleep(0.1)
        out, err = attack.communicate()
        assert attack.returncode == 0, err
        outs = [d.communicate(timeout=120) for d in drivers]
    finally:
        for proc in [*drivers, *([attack] if attack else [])]:
            if proc.poll() is None:
                os.killpg(proc.pid, 9) if proc in drivers else proc.kill()
                proc.wait()
    # The kernel refused everything that touched the other user's reservations.
    refused = json.loads(out.splitlines()[-1])
    assert refused == {"delete theirs": "EPERM", "empty theirs": "EACCES",
                       "edit theirs": "EACCES", "rename over theirs": "EPERM",
                       "replace the lock": "EPERM"}
    # The victim's API answered every request, each within the bound, and said why it
    # waited while the ledger was damaged or locked.
    assert answers and {status for status, _, _ in answers} == {200}
    slowest = max(seconds for _, seconds, _ in answers)
    print(f"\nthe victim's API: {len(answers)} answers during the attack, slowest "
          f"{slowest:.3f} s")
    assert slowest < API_BOUND_SEC, f"the API took {slowest:.2f} s"
    reasons = [body["ledger_error"] for _, _, body in answers if body.get("ledger_error")]
    assert any("damaged" in r for r in reasons) and any("is held by pid" in r for r in reasons)
    assert not any(e["run_id"] == "forged" for _, _, body in answers
                   for e in body.get("ledger", []))
    # Every job ran, and never two 16,000 MiB runs at once on the 24 GiB GPU.
    for driver, (stdout, stderr) in zip(drivers, outs, strict=True):
        assert driver.returncode == 0, stderr.decode()[-2000:]
        assert set(orjson.loads(stdout).values()) == {"done"}
    events = []
    for user in (victim, attacker):
        for run_dir in runs_root(base / user / "outputs").iterdir():
            events.append((float((run_dir / "started").read_text()), 1))
            events.append((float((run_dir / "ended").read_text()), -1))
    assert len(events) == 2 * 2 * JOBS
    live = 0
    for _, delta in sorted(events):
        live += delta
        assert live <= 1, "two 16,000 MiB runs at once: over capacity"

