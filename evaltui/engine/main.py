"""The run subprocess: ``python -m evaltui.engine.main RUN_DIR``.

Spawned detached (its own session) by the scheduler or ``evaltui eval``; it owns the run
dir until ``_DONE``. SIGTERM or SIGINT asks it to stop: the episode in flight ends
``cancelled`` at its next step boundary, the summary says ``cancelled``, and it exits.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from evaltui.engine.pdeathsig import arm_pdeathsig
from evaltui.engine.quickexit import exit_now
from evaltui.engine.zygote import WorkerZygote, preload_modules


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaltui.engine.main")
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args(argv)
    run_dir: Path = args.run_dir.resolve()
    if not (run_dir / "spec.json").is_file():
        print(f"error: {run_dir} has no spec.json", file=sys.stderr)
        return 2
    try:
        # Plain json: evaltui.rundir's imports would delay the zygote's start below.
        spec = json.loads((run_dir / "spec.json").read_bytes())
    except (OSError, ValueError):
        spec = {}  # the runner reports the broken spec in summary.json
    if isinstance(spec, dict):
        if spec.get("scheduling", {}).get("tie_to_backend"):
            # settings().parent_pid, read directly: importing pydantic-settings here would
            # delay the zygote's start below by ~0.2 s.
            parent = os.environ.get("EVALTUI_PARENT_PID")
            arm_pdeathsig(expected_parent=int(parent) if parent else None)
        workspace = spec.get("active_workspace_dir")
        if isinstance(workspace, str) and workspace:
            sys.path.insert(0, workspace)
    stop = threading.Event()

    def request_stop(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    # The workers' template process imports while this process imports the runner.
    zygote = WorkerZygote(preload_modules(spec)).start()
    try:
        from evaltui.engine.runner import BatchEvalRunner

        return BatchEvalRunner(run_dir, stop=stop, zygote=zygote).run()
    finally:
        zygote.close()


if __name__ == "__main__":
    # summary.json and _DONE are written: whoever waits for this process (`evaltui eval`,
    # the scheduler) need not wait for the interpreter's teardown as well.
    exit_now(main())
