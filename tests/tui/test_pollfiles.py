"""Readers poll where inotify cannot see other nodes' writes (``EVALTUI_POLL_FILES``,
evaltui/pollfiles.py): the filesystem type from /proc/mounts, the setting, and a run dir
followed by polling alone still delivering every update (real files)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from runfixtures import write_episode, write_summary

from evaltui.rundir.pollfiles import (
    filesystem_type,
    is_network_filesystem,
    mount_type,
    poll_mode,
    should_poll,
)
from evaltui.runview.runmodel import RunModel
from evaltui.runview.watcher import RunWatcher

MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
tmpfs /tmp tmpfs rw 0 0
server:/export/home /home nfs4 rw,vers=4.2 0 0
lfs@o2ib:/scratch /scratch lustre rw 0 0
gpfs0 /gpfs/work gpfs rw 0 0
//files/lab\\040share /mnt/lab\\040share cifs rw 0 0
user@host:/data /mnt/remote fuse.sshfs rw 0 0
/dev/vdb /scratch/local ext4 rw 0 0
"""


@pytest.mark.parametrize(("path", "fs_type", "poll"), [
    ("/home/ana/outputs/eval_runs", "nfs4", True),
    ("/scratch/ana/outputs", "lustre", True),
    ("/gpfs/work/x", "gpfs", True),
    ("/mnt/lab share/outputs", "cifs", True),  # /proc/mounts writes a space as octal 040
    ("/mnt/remote/o", "fuse.sshfs", True),
    ("/scratch/local/o", "ext4", False),  # a local disk mounted inside a Lustre tree
    ("/scratch/localx", "lustre", True),  # /scratch/local is not a prefix of it
    ("/tmp/o", "tmpfs", False),
    ("/var/o", "ext4", False),
    ("/homes/x", "ext4", False),
])
def test_network_filesystems_are_told_by_the_mount_holding_the_path(
        path: str, fs_type: str, poll: bool) -> None:
    assert mount_type(path, MOUNTS) == fs_type
    assert is_network_filesystem(fs_type) is poll


def test_auto_polls_where_the_outputs_dir_is_on_a_network_filesystem(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALTUI_POLL_FILES", raising=False)
    on_nfs = f"/dev/vda / ext4 rw 0 0\nsrv:/o {os.path.realpath(tmp_path)} nfs rw 0 0\n"
    assert should_poll(tmp_path / "eval_runs" / "not-made-yet", on_nfs)
    assert not should_poll(tmp_path, "/dev/vda / ext4 rw 0 0\n")


@pytest.mark.parametrize(("value", "mode"), [("on", "on"), ("OFF", "off"), ("", "auto"),
                                             ("sometimes", "auto")])
def test_the_setting_forces_or_forbids_polling(value: str, mode: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_POLL_FILES", value)
    assert poll_mode() == mode
    nfs = "server:/x / nfs rw 0 0\n"
    assert should_poll(tmp_path, nfs) is (mode != "off")
    assert should_poll(tmp_path, "/dev/vda / ext4 rw 0 0\n") is (mode == "on")


def test_this_machines_own_mounts_are_read(tmp_path: Path) -> None:
    assert filesystem_type(tmp_path) not in (None, "")


def test_forced_polling_still_delivers_every_update(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """EVALTUI_POLL_FILES=on: the watcher never sets up a watch, yet sees a new episode,
    a rewritten summary and the run's end."""
    monkeypatch.setenv("EVALTUI_POLL_FILES", "on")
    run_dir = tmp_path / "20260101_000000"
    rows = [write_episode(run_dir, 0)]
    write_summary(run_dir, rows, status="running", total=3)
    model, changed = RunModel(), threading.Event()
    watcher = RunWatcher(run_dir, model, changed.set, poll_interval=0.05)
    assert watcher.force_polling
    monkeypatch.setattr(watcher, "_watch", lambda: pytest.fail("set up an inotify watch"))
    watcher.start()
    try:
        deadline = time.monotonic() + 10
        def wait(cond) -> None:
            while not cond():
                assert time.monotonic() < deadline, "timed out"
                time.sleep(0.01)
        wait(lambda: model.known(0))
        rows.append(write_episode(run_dir, 1))
        wait(lambda: model.known(1))
        write_summary(run_dir, rows + [{**rows[0], "episode_index": 2}], status="done",
                      total=3)
        wait(lambda: model.known(2))
        wait(lambda: model.status is not None and model.status.summary["status"] == "done")
    finally:
        watcher.close()
    assert not watcher.is_alive()
