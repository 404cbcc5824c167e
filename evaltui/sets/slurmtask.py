"""The batch step of one task of a set's Slurm array:
``python -m evaltui.sets.slurmtask SET_DIR/slurm_array.json``.

It finds its member's run dir in the manifest by ``SLURM_ARRAY_TASK_ID``, sends its
output to that run dir's ``run.log`` (as any Slurm run's) and execs the run process on
it: the batch step's process *is* the run, so ``--signal=B:USR1`` and scancel's SIGTERM
reach it, and it requeues itself by its array id (``JOB_TASK``:
:func:`evaltui.slurm.jobid.own_job_id`). Only the standard library before the exec.
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m evaltui.sets.slurmtask SET_DIR/slurm_array.json",
              file=sys.stderr)
        return 2
    task = os.environ.get("SLURM_ARRAY_TASK_ID")
    if not task:
        print("evaltui: not a Slurm array task (no SLURM_ARRAY_TASK_ID)", file=sys.stderr)
        return 2
    try:
        with open(argv[0], encoding="utf-8") as f:
            entry = json.load(f)["tasks"][task]
        run_dir = str(entry["run_dir"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"evaltui: array task {task}: no run dir in {argv[0]} ({exc!r})",
              file=sys.stderr)
        return 2
    log = os.open(os.path.join(run_dir, "run.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                  0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.execv(sys.executable, [sys.executable, "-m", "evaltui.engine.main", run_dir])
    return 1  # not reached: execv returns only by raising


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
