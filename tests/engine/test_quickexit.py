"""exit_now: what a normal exit does that others can see still happens; the code is kept."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import atexit, sys, threading, time
    from pathlib import Path
    from evaltui.engine.processes.quickexit import exit_now
    out = Path(sys.argv[1])

    def late():
        time.sleep(0.3)
        (out / "thread").write_text("joined")

    threading.Thread(target=late).start()  # non-daemon: a normal exit waits for it
    atexit.register(lambda: (out / "atexit").write_text("ran"))
    sys.stdout.write("buffered, no newline")  # stdout to a file: block-buffered
    sys.stderr.write("err text")
    exit_now(7)
    (out / "after").write_text("must not run")
""")


def test_exit_now_joins_threads_runs_atexit_flushes_and_keeps_the_code(tmp_path: Path) -> None:
    with open(tmp_path / "stdout", "w") as stdout, open(tmp_path / "stderr", "w") as stderr:
        code = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], stdout=stdout,
                              stderr=stderr, timeout=60).returncode
    assert code == 7
    assert (tmp_path / "thread").read_text() == "joined"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "stdout").read_text() == "buffered, no newline"
    assert (tmp_path / "stderr").read_text() == "err text"
    assert not (tmp_path / "after").exists()

