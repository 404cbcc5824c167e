"""Slurm's client commands, read and driven from Python: no engine, no Textual.

- :mod:`~evaltui.contract.slurmoptions`: ``eval.slurm`` (DESIGN §12) as :class:`SlurmOptions`.
- :mod:`~evaltui.slurm.commands`: whether sbatch & co. exist; their errors as one line.
- :mod:`~evaltui.slurm.submit`: the sbatch command line, submission, ``--test-only``.
- :mod:`~evaltui.slurm.jobid`: job ids (``123``, ``123_4``, ``123_[5-9%2]``).
- :mod:`~evaltui.slurm.jobinfo`: squeue / scontrol read into :class:`SlurmJobInfo`.
- :mod:`~evaltui.slurm.jobstate`: Slurm's job states and the run states they mean.
- :mod:`~evaltui.slurm.control`: scancel, requeue.

A Slurm executor, when there is one, builds on these; docs/slurm.md says what exists so far.
"""
