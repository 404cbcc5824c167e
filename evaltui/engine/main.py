"""The run subprocess: ``python -m evaltui.engine.main RUN_DIR``.

Spawned detached (its own session) by the scheduler or ``evaltui eval``; it owns the run
dir until ``_DONE``. SIGTERM or SIGINT asks it to stop: the episode in flight ends
``cancelled`` at its next step boundary, the summary says ``cancelled``, and it exits.

``--run-dir-from-stdin`` (what ``evaltui eval`` starts, before it has validated the spec):
import the runner first, then read the run dir from stdin; nothing on stdin (the spec
was refused, or ``eval`` is gone) means exit at once. From the run dir on, it is the same
run process, its output in ``run.log``.
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
    parser.add_argument("run_dir", type=Path, nargs="?")
    parser.add_argument("--run-dir-from-stdin", action="store_true",
                        help="import first, then read the run dir from stdin")
    args = parser.parse_args(argv)
    if args.run_dir_from_stdin:
        given = await_run_dir()
        if given is None:
            return 0
        run_dir = given
    elif args.run_dir is None:
        parser.error("a run dir, or --run-dir-from-stdin")
    else:
        run_dir = args.run_dir.resolve()
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
    # The workers' template process imports while this process imports the runner (or,
    # started with --run-dir-from-stdin, while it checks the spec).
    # A Ray run's workers are actors on the cluster: a local template would only take
    # CPU from this process's imports and the actors' start.
    on_ray = isinstance(spec, dict) and isinstance(spec.get("eval"), dict) \
        and spec["eval"].get("executor") == "ray"
    zygote = None if on_ray else WorkerZygote(preload_modules(spec)).start()
    try:
        from evaltui.engine.runner import BatchEvalRunner

        return BatchEvalRunner(run_dir, stop=stop, zygote=zygote).run()
    finally:
        if zygote is not None:
            zygote.close()


def await_run_dir() -> Path | None:
    """Import the runner, then take the run dir from stdin and its run.log as stdout/stderr.

    ``evaltui eval`` starts this process before it validates the spec, so that these
    imports (~0.6 s) overlap with its validation; None if stdin ends first.
    """
    import evaltui.engine.runner  # noqa: F401  (the point: imported while eval validates)
    from evaltui.records import RUN_LOG_FILENAME

    line = sys.stdin.readline().strip()
    if not line:
        return None
    run_dir = Path(line).resolve()
    if sys.path and sys.path[0] == os.getcwd():
        sys.path[0] = str(run_dir)  # as if started in the run dir, like spawn_run does
    # What spawn_run gives a run process: run.log as stdout and stderr, stdin from
    # /dev/null, the run dir as cwd.
    log = os.open(run_dir / RUN_LOG_FILENAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((log, 1), (log, 2), (null, 0)):
        os.dup2(fd, target)
    os.close(log)
    os.close(null)
    os.chdir(run_dir)
    return run_dir


if __name__ == "__main__":
    # summary.json and _DONE are written: whoever waits for this process (`evaltui eval`,
    # the scheduler) need not wait for the interpreter's teardown as well.
    exit_now(main())
