"""A pytest ended by SIGTERM (a CI timeout, a developer's ``kill``) still stops what its
session fixtures started: the clusters' fixtures run inside ``teardown_on_sigterm``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
from waiting import wait_until

HERE = Path(__file__).resolve().parent

CONFTEST = """
import subprocess, sys
from pathlib import Path
import pytest
sys.path.insert(0, {tests!r})
from sigterm import teardown_on_sigterm

@pytest.fixture(scope="session")
def daemon():
    with teardown_on_sigterm():
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        Path("daemon.pid").write_text(str(proc.pid))
        try:
            yield proc
        finally:  # what a cluster fixture does: stop its daemons by PID
            proc.kill()
            proc.wait()
"""

TEST = """
import time
from pathlib import Path

def test_long(daemon):
    Path("running").touch()
    time.sleep(600)
"""


def test_sigterm_to_pytest_tears_the_session_fixtures_down(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST.format(tests=str(HERE)))
    (tmp_path / "test_long.py").write_text(TEST)
    pytest_proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_long.py"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True)
    daemon_pid = None
    try:
        wait_until(lambda: (tmp_path / "running").exists() or pytest_proc.poll() is not None,
                   what="the inner test to start")
        assert pytest_proc.poll() is None, pytest_proc.communicate()[0].decode()
        daemon_pid = int((tmp_path / "daemon.pid").read_text())
        pytest_proc.send_signal(signal.SIGTERM)
        out = pytest_proc.communicate(timeout=60)[0].decode()
        assert "KeyboardInterrupt" in out, out
        assert not psutil.pid_exists(daemon_pid) or \
            psutil.Process(daemon_pid).status() == psutil.STATUS_ZOMBIE, out
    finally:
        for pid in (pytest_proc.pid, daemon_pid):
            if pid is not None and psutil.pid_exists(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # ended between the check and the kill
        pytest_proc.wait()
