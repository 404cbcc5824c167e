"""The backend's scheduler: queue, GPU-budget admission, machine-wide ledger, run lifecycle.

Headless: it never imports the TUI or the HTTP API (they are built on
:class:`evaltui.scheduler.scheduler.JobScheduler`). This package imports nothing, so that
reading one pure part (``evaltui.scheduler.admission.decision``) does not load the rest:

- ``scheduler.py``  JobScheduler, the façade; ``core.py`` what its parts share;
  ``ticking.py`` the tick, ``loop.py`` its thread; ``reads.py`` status reads;
  ``events.py`` listener events; ``lock.py`` the interactive lock; ``procs.py``
  process facts
- ``runs/``       a run's life: the job record, submit/cancel/resume, starting, restore
  and takeover from disk, the run's process, finished-episode events, the run index
- ``admission/``  who starts: the pure decision, resource probes, the machine's ledger,
  accounting, calibration and the sampling that feeds it
- ``admits/``     queue places for commands ``evaltui run`` wraps
- ``shared/``     shared nodesets the scheduler hosts for its runs
- ``cluster/``    admission across a Ray cluster (probe, cluster ledger, node loss)
"""
