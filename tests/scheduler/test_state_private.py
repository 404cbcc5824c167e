"""The state dir is 0700 and its files 0600, whoever made them and whenever (DESIGN §11)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from schedhelpers import line_spec, wait_until

from evaltui.api.auth import load_or_create_token
from evaltui.contract.states import RunState
from evaltui.rundir.layout import state_dir
from evaltui.scheduler.scheduler import JobScheduler


def _modes(root: Path) -> dict[str, int]:
    """Permission bits of ``root`` and everything under it (symlinks skipped)."""
    out = {".": stat.S_IMODE(os.stat(root).st_mode)}
    for path in root.rglob("*"):
        st = os.lstat(path)
        if not stat.S_ISLNK(st.st_mode):
            out[str(path.relative_to(root))] = stat.S_IMODE(st.st_mode)
    return out


def test_a_pre_existing_0755_dir_with_0644_files_is_tightened(sched_env: dict[str, Path]
                                                              ) -> None:
    """A state dir that exists already is made private, and so are ledger.json and
    calibration.json."""
    state = sched_env["state"]
    os.chmod(state, 0o755)
    for name in ("ledger.json", "calibration.json", "token"):
        (state / name).write_text("{}")
        os.chmod(state / name, 0o644)
    (state / "fakegpu" / "0").mkdir(parents=True)
    os.chmod(state / "fakegpu", 0o755)
    (state / "fakegpu" / "0" / "1-2.json").write_text("{}")
    os.chmod(state / "fakegpu" / "0" / "1-2.json", 0o664)
    outside = state.parent / "not-ours.txt"
    outside.write_text("x")
    os.chmod(outside, 0o644)
    (state / "link").symlink_to(outside)
    assert state_dir() == state.resolve()
    modes = _modes(state)
    assert modes["."] == 0o700
    assert {k: v for k, v in modes.items() if k != "."} == {
        "ledger.json": 0o600, "calibration.json": 0o600, "token": 0o600,
        "fakegpu": 0o700, "fakegpu/0": 0o700, "fakegpu/0/1-2.json": 0o600}
    assert stat.S_IMODE(os.stat(outside).st_mode) == 0o644  # a symlink is never followed


def test_every_file_the_scheduler_writes_is_0600(
        make_scheduler: Callable[..., JobScheduler], fake_gpus: Callable[[str], None],
        dataset: Path, sched_env: dict[str, Path]) -> None:
    """Ledger, calibration, the interactive lock, fake-GPU charges, the shared nodeset
    registry and host log, admit entries and the token: all 0600, in dirs of 0700."""
    old = os.umask(0o022)  # the usual umask: files would be 0644 without an explicit mode
    try:
        fake_gpus("1x24576")
        sched = make_scheduler().start()
        load_or_create_token()
        spec = line_spec(dataset, episodes=2, marginal_vram_mb=2000, vram_mb=1500)
        spec["graph"]["nodesets"]["policy"]["parallelism"] = "shared"
        run_id, _ = sched.submit(spec)
        wait_until(lambda: sched.nodesets(), what="the shared nodeset")
        sched.lock("me", ttl_sec=60)
        seen: dict[str, int] = {}
        while sched.get_run(run_id).state not in (RunState.DONE, RunState.FAILED):
            seen.update(_modes(sched_env["state"]))  # charges come and go with the run
            time.sleep(0.02)
        sched.unlock("me")
        assert sched.wait(run_id, 30) is RunState.DONE
        wait_until(lambda: (sched_env["state"] / "calibration.json").exists(),
                   what="the calibration")
        seen.update(_modes(sched_env["state"]))
    finally:
        os.umask(old)
    names = {Path(k).name for k in seen}
    for expected in (f"u{os.getuid()}.json", f"u{os.getuid()}.lock", "ledger.lock",
                     "calibration.json", "interactive_lock.json", "token"):
        assert expected in names, sorted(names)
    assert any(k.startswith("fakegpu/0/") and k.endswith(".json") for k in seen), sorted(seen)
    assert any(k.startswith("shared/logs/") for k in seen), sorted(seen)
    loose = {k: oct(v) for k, v in seen.items() if v & 0o077}
    assert loose == {}


@pytest.mark.parametrize("command", [["ledger", "where"], ["serve", "--port", "0"]])
def test_a_state_dir_that_cannot_be_made_is_one_line_not_a_traceback(
        tmp_path: Path, command: list[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {**os.environ, "EVALTUI_STATE_DIR": str(blocker / "state"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-m", "evaltui.cli", *command], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"error: cannot make the state dir {blocker / 'state'} "
                                   "(from EVALTUI_STATE_DIR): Not a directory"), done.stderr
