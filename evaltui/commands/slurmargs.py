"""The ``--slurm-*`` options of ``eval``/``submit``: ``eval.slurm`` (DESIGN §12) on the
command line. Each is one field of :class:`~evaltui.slurm.options.SlurmOptions`; a given
one overrides the spec file's."""

from __future__ import annotations

import argparse
from typing import Any

_OPTIONS = (
    ("--slurm-partition", "partition", str, "P", "partition to submit to (default: the "
     "cluster's default)"),
    ("--slurm-account", "account", str, "A", "account charged for the job"),
    ("--slurm-qos", "qos", str, "Q", "quality of service"),
    ("--slurm-time", "time", str, "T", "the job's time limit in Slurm's formats (90, "
     "1:30:00, 2-00:00:00)"),
    ("--slurm-cpus-per-worker", "cpus_per_worker", int, "N", "CPUs of each worker step "
     "(default 1)"),
    ("--slurm-mem-per-worker", "mem_per_worker_mb", int, "MB", "memory of each worker "
     "step in MB"),
    ("--slurm-gres", "gres", str, "GRES", "gres of the job for shared nodesets (gpu:1)"),
)


def add_slurm_arguments(p: argparse.ArgumentParser) -> None:
    for flag, field, kind, metavar, help_text in _OPTIONS:
        p.add_argument(flag, dest=f"slurm_{field}", type=kind, metavar=metavar,
                       help=f"--executor slurm: {help_text}")
    p.add_argument("--slurm-arg", dest="slurm_extra_args", action="append", default=[],
                   metavar="--OPTION=VALUE",
                   help="--executor slurm: one more sbatch option (repeatable)")


def slurm_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The ``eval.slurm`` fields the options give (the ones left out are absent)."""
    fields = [field for _, field, *_ in _OPTIONS] + ["extra_args"]
    given = {f: getattr(args, f"slurm_{f}", None) for f in fields}
    return {k: v for k, v in given.items() if v not in (None, [])}
