"""A Slurm worker step's main: ``python -m evaltui.engine.executor.slurm.step URL SLOT START``.

The run's :class:`~evaltui.engine.executor.slurm.executor.SlurmExecutor` starts it with
``srun --exact`` and writes the channel secret (hex, one line) to srun's stdin, which srun
forwards to the task: never argv, environment or disk. The step dials the run back over
the authenticated channel (:mod:`evaltui.engine.hosting.channel`), says who and where it
is -- ``("hello", slot, start, pid, node, step_id)``, ``node`` being ``SLURMD_NODENAME`` --
and is sent its :class:`~evaltui.engine.executor.workerloop.WorkerConfig` (pickled, read
once the spec's workspace is on ``sys.path``, as in the run process); then it is an
ordinary worker (:func:`~evaltui.engine.executor.workerloop.run_worker`) on that channel.
SIGTERM or SIGINT (``scancel --signal=TERM JOB.STEP``, or srun forwarding its own) ends
the episode in flight ``cancelled``, as for a local worker.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import sys
import threading
import traceback

from evaltui.engine.executor.workerloop import run_worker
from evaltui.engine.hosting.channel import dial
from evaltui.engine.run.allocgpus import adopt_slurm_gpus

CONFIG_TIMEOUT_SEC = 60.0
"""How long a step waits for its config after the hello before it gives up."""


def main(argv: list[str]) -> int:
    url, slot, start = argv[0], int(argv[1]), int(argv[2])

    adopt_slurm_gpus()  # this step's GPUs (none without gres), not the batch step's
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    secret = bytes.fromhex(sys.stdin.readline().strip())
    conn = dial(url, secret)
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    conn.send(("hello", slot, start, os.getpid(), node, os.environ.get("SLURM_STEP_ID")))
    if not conn.poll(CONFIG_TIMEOUT_SEC):
        print(f"evaltui: worker step {slot}: no config from the run within "
              f"{CONFIG_TIMEOUT_SEC:g} s", file=sys.stderr, flush=True)
        return 1
    message = conn.recv()
    if message[0] != "config":
        return 0  # the run does not want this worker any more
    _, workspace, config_bytes = message
    if workspace:
        sys.path.insert(0, workspace)  # the user's nodesets, as in the run process
    try:
        config = pickle.loads(config_bytes)
    except Exception as exc:  # a nodeset class this node cannot import
        traceback.print_exc()
        conn.send(("failed", f"worker step {slot} cannot load its config: "
                             f"{type(exc).__name__}: {exc}; its traceback is in run.log"))
        return 1

    try:
        return run_worker(conn, config, stop)
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
