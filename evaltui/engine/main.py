"""The run subprocess: ``python -m evaltui.engine.main RUN_DIR``.

Spawned detached (its own session) by the scheduler or ``evaltui eval``; it owns the run
dir until ``_DONE``. It checks the spec, then forks its workers' zygote from itself (the
check has imported what the workers need). SIGTERM or SIGINT asks it to stop: the
episode in flight ends ``cancelled`` at its next step boundary, the summary says
``cancelled``, and it exits. (One during its imports, before the handlers are set, ends
it at once; whoever sent it reads the run as cancelled all the same.)

``--spec-from-stdin --reply-fd N`` (what ``evaltui eval`` starts, before it has built its
spec): import the runner first (this module's imports, ~1 s, while the CLI builds the
spec), then read the spec from stdin, check it, write the run dir and answer on fd N
(:mod:`evaltui.engine.run.intake`); from the run dir on, it is the same run process, its
output in ``run.log``, and its workers' zygote a fork of it. The spec is checked once,
here: the CLI never imports the nodeset modules.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from evaltui.contract.spec import parse_spec
from evaltui.contract.states import RunExit
from evaltui.engine.executor.kinds import executor_of
from evaltui.engine.executor.local.zygote import WorkerZygote, preload_modules
from evaltui.engine.graph.specchecks import CheckedSpec, check_spec
from evaltui.engine.processes.pdeathsig import arm_pdeathsig
from evaltui.engine.processes.quickexit import exit_now
from evaltui.engine.run.allocgpus import adopt_slurm_gpus
from evaltui.engine.run.intake import read_request, take_spec
from evaltui.engine.run.preemption import is_slurm_batch, requeue_on_signal, requeue_self, restarted
from evaltui.engine.run.runner import BatchEvalRunner
from evaltui.slurm.runsubmit import record_placement


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaltui.engine.main")
    parser.add_argument("run_dir", type=Path, nargs="?")
    parser.add_argument("--spec-from-stdin", action="store_true",
                        help="read the spec from stdin, check it, write the run dir, run it")
    parser.add_argument("--reply-fd", type=int,
                        help="with --spec-from-stdin: where to answer (the run dir, or why not)")
    args = parser.parse_args(argv)
    if args.spec_from_stdin:
        if args.reply_fd is None:
            parser.error("--spec-from-stdin needs --reply-fd")
        return run_from_stdin(args.reply_fd)
    if args.run_dir is None:
        parser.error("a run dir, or --spec-from-stdin")
    run_dir = args.run_dir.resolve()
    if not (run_dir / "spec.json").is_file():
        print(f"error: {run_dir} has no spec.json", file=sys.stderr)
        return 2
    try:
        spec = json.loads((run_dir / "spec.json").read_bytes())
    except (OSError, ValueError):
        spec = {}  # the runner reports the broken spec in summary.json
    adopt(spec)
    stop = stop_on_signals()
    requeue = None
    if is_slurm_batch(spec):  # USR1 before the time limit or a preemption: requeue
        adopt_slurm_gpus()  # the fake GPU index follows the GPUs Slurm gave, not sbatch's shell
        record_placement(run_dir)  # where it runs, for readers on the login node
        requeue = requeue_on_signal(stop)
        restarted(run_dir)
    try:
        checked: CheckedSpec | None = check_spec(parse_spec(spec))
    except Exception:  # noqa: BLE001  (whatever it is, the runner's own check reports it)
        checked = None
    code = run_checked(run_dir, spec, checked, stop)
    if requeue is not None and requeue.is_set():
        return requeue_self(run_dir) or code
    return code


def run_from_stdin(reply_fd: int) -> int:
    """``evaltui eval``'s run process: the spec from stdin, checked here, then the run."""
    stop = stop_on_signals()
    request = read_request(sys.stdin.buffer)
    if request is None:
        return 0
    spec, outputs = request
    adopt(spec)
    taken = take_spec(spec, outputs, reply_fd, stop=stop)
    if taken is None:
        # Stopped (SIGTERM/SIGINT) before its run dir was written, or the spec refused.
        return RunExit.INTERRUPTED if stop.is_set() else RunExit.REFUSED
    run_dir, checked = taken
    return run_checked(run_dir, spec, checked, stop)


def run_checked(run_dir: Path, spec: Any, checked: CheckedSpec | None,
                stop: threading.Event) -> int:
    """Run the run dir with its spec checked in this process (None: the check failed and
    the runner checks it again to say why in summary.json).

    The check imported the graph's nodesets and the runner the worker code and numpy, so
    the workers' zygote is a fork of this process (no thread yet), not a cold interpreter
    doing the same imports on the same cores.
    """
    # workers not this process's children (actors, job steps): a zygote would only take CPU
    zygote = None if checked is None or executor_of(spec).workers_elsewhere \
        else WorkerZygote(preload_modules(spec)).start_by_fork()
    try:
        return BatchEvalRunner(run_dir, stop=stop, zygote=zygote, checked=checked).run()
    finally:
        if zygote is not None:
            zygote.close()


def adopt(spec: Any) -> None:
    """What a spec asks of the run process itself: dying with its backend
    (``tie_to_backend``) and its workspace on ``sys.path``."""
    if not isinstance(spec, dict):
        return
    scheduling = spec.get("scheduling")
    if isinstance(scheduling, dict) and scheduling.get("tie_to_backend"):
        # settings().parent_pid, read directly: importing pydantic-settings here would
        # delay the zygote's start by ~0.2 s.
        parent = os.environ.get("EVALTUI_PARENT_PID")
        arm_pdeathsig(expected_parent=int(parent) if parent else None)
    workspace = spec.get("active_workspace_dir")
    if isinstance(workspace, str) and workspace:
        sys.path.insert(0, workspace)


def stop_on_signals() -> threading.Event:
    """SIGTERM and SIGINT set the returned event: the run ends ``cancelled``."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


if __name__ == "__main__":
    # summary.json and _DONE are written: whoever waits for this process (`evaltui eval`,
    # the scheduler) need not wait for the interpreter's teardown as well.
    exit_now(main())
