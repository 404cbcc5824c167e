"""Submitting a run to Slurm: the sbatch command line from ``eval.slurm`` and what the job
runs, the submission, and a dry check (``sbatch --test-only``) whose refusal is one line
naming the field at fault."""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evaltui.contract.slurmoptions import SlurmOptions
from evaltui.slurm.commands import SlurmError, check_controller, error_line, run_slurm
from evaltui.slurm.jobid import SlurmJobId, parse_parsable

DEFAULT_SIGNAL = "B:USR1@90"
"""USR1 to the batch step 90 s before the time limit: time to flush and requeue."""


class SlurmRefused(SlurmError):
    """Slurm will not take the job as asked; the message names the ``eval.slurm`` field."""


@dataclass(frozen=True)
class BatchJob:
    """What one submission runs, beside the user's :class:`SlurmOptions`."""

    command: Sequence[str]
    """The batch step's command (the evaltui run process), exec'd by ``--wrap``."""
    job_name: str
    output: Path
    """stdout and stderr of the batch step; Slurm's ``%j``/``%A``/``%a`` patterns work."""
    tasks: int = 1
    """``--ntasks``: how many worker steps the allocation holds at once."""
    array: str | None = None
    """``--array`` (``0-5%2``: six tasks, two at a time)."""
    requeue: bool = True
    signal: str | None = DEFAULT_SIGNAL
    no_kill: bool = True
    """``--no-kill``: a failed node takes only its own steps (their srun says ``Node
    failure``) and the job goes on with the others; without it Slurm kills (and
    requeues) the whole job when any node of it goes down."""
    chdir: Path | None = None


def sbatch_argv(options: SlurmOptions, job: BatchJob, test_only: bool = False) -> list[str]:
    """The sbatch command line; ``extra_args`` come after evaltui's own options (so a
    site's requirement may override them) and before the script."""
    argv = ["sbatch", "--test-only" if test_only else "--parsable",
            f"--job-name={job.job_name}", f"--output={job.output}", "--open-mode=append",
            f"--ntasks={job.tasks}", f"--cpus-per-task={options.cpus_per_worker}"]
    for flag, value in (("partition", options.partition), ("account", options.account),
                        ("qos", options.qos), ("time", options.time),
                        ("gres", options.gres), ("array", job.array),
                        ("signal", job.signal)):
        if value is not None:
            argv.append(f"--{flag}={value}")
    if options.mem_per_worker_mb is not None:
        per_cpu = math.ceil(options.mem_per_worker_mb / options.cpus_per_worker)
        argv.append(f"--mem-per-cpu={per_cpu}")
    argv.append("--requeue" if job.requeue else "--no-requeue")
    if job.no_kill:
        argv.append("--no-kill")
    if job.chdir is not None:
        argv.append(f"--chdir={job.chdir}")
    # exec: the batch step's process is the command itself, not a shell above it, so
    # the signal before the time limit (B:USR1, the batch step only) reaches it
    return [*argv, *options.extra_args, f"--wrap=exec {shlex.join(job.command)}"]


def submit(options: SlurmOptions, job: BatchJob) -> SlurmJobId:
    """Submit; the job's id (an array's: its array job id). SlurmRefused, one line, when
    the job can never run (:func:`check_fits`) or sbatch refuses it."""
    check_fits(options, job)
    done = run_slurm(sbatch_argv(options, job), check=False)
    if done.returncode != 0:
        raise refusal(options, job, error_line(done.stderr))
    return parse_parsable(done.stdout)


def check_fits(options: SlurmOptions, job: BatchJob) -> None:
    """SlurmRefused when the partition's nodes, whatever their state, could never hold
    the job: a worker larger than every node, or more workers than all its CPUs. sbatch
    itself takes such a job and leaves it pending for ever (``PartitionConfig``)."""
    nodes = _partition_nodes(options.partition)
    if nodes.max_cpus and options.cpus_per_worker > nodes.max_cpus:
        raise _too_big("cpus_per_worker", options, nodes)
    if nodes.max_mem_mb and options.mem_per_worker_mb is not None and \
            options.mem_per_worker_mb > nodes.max_mem_mb:
        raise _too_big("mem_per_worker_mb", options, nodes)
    need = job.tasks * options.cpus_per_worker
    if nodes.total_cpus and need > nodes.total_cpus:
        raise SlurmRefused(
            f"eval.worker_count: {job.tasks} workers of {options.cpus_per_worker} CPU(s) "
            f"need {need} CPUs; partition {options.partition or '(default)'} has "
            f"{nodes.total_cpus}")


def check_submittable(options: SlurmOptions, job: BatchJob) -> str:
    """Ask Slurm whether it would start the job, submitting nothing: its answer (``Job 9
    to start at ... on nodes n1 in partition main``), or SlurmRefused. A warning, not a
    gate: ``--test-only`` also refuses what cannot start *now* (a node it needs is down),
    which sbatch would queue."""
    done = run_slurm(sbatch_argv(options, job, test_only=True), check=False)
    if done.returncode != 0:
        raise refusal(options, job, error_line(done.stderr))
    return error_line(done.stderr)  # sbatch --test-only answers on stderr


def refusal(options: SlurmOptions, job: BatchJob, line: str) -> SlurmRefused:
    """Slurm's refusal ``line`` as one line naming the field at fault and, where it
    helps, what the cluster has instead."""
    low = line.lower()
    if "invalid partition" in low:
        parts = ", ".join(sorted(_partitions())) or "none"
        return SlurmRefused(f"eval.slurm.partition: Slurm has no partition "
                            f"{options.partition!r} (it has: {parts})")
    if "invalid generic resource" in low:
        return SlurmRefused(f"eval.slurm.gres: Slurm knows no gres {options.gres!r} "
                            f"(its nodes have: {_node_gres(options.partition)})")
    if "can not be satisfied" in low or "requested node configuration" in low:
        return _unsatisfiable(options, job)
    if "time limit" in low or "--time" in low:
        return SlurmRefused(f"eval.slurm.time: {line}")
    return SlurmRefused(f"Slurm refused the job: {line}")


@dataclass(frozen=True)
class PartitionNodes:
    """What a partition's nodes have, as configured (sinfo; down nodes included)."""

    max_cpus: int = 0
    max_mem_mb: int = 0
    total_cpus: int = 0
    gres: str = "unknown"

    def __str__(self) -> str:
        return (f"its nodes have at most {self.max_cpus} CPUs, {self.max_mem_mb} MB, "
                f"gres: {self.gres}")


def _partition_nodes(partition: str | None) -> PartitionNodes:
    """Zeros (no check) where sinfo cannot say."""
    argv = ["sinfo", "--noheader", "--format=%D|%c|%m|%G"]
    if partition:
        argv.append(f"--partition={partition}")
    try:
        lines = run_slurm(argv).stdout.split()
    except SlurmError:
        return PartitionNodes()
    rows: list[tuple[int, int, int, str]] = []
    for parts in (ln.split("|") for ln in lines):
        if len(parts) == 4 and all(_count(v) is not None for v in parts[:3]):
            nodes, cpus, mem = (_count(v) or 0 for v in parts[:3])
            rows.append((nodes, cpus, mem, parts[3]))
    gres = ", ".join(sorted({r[3] for r in rows} - {"(null)"})) or "no gres"
    return PartitionNodes(max((r[1] for r in rows), default=0),
                          max((r[2] for r in rows), default=0),
                          sum(r[0] * r[1] for r in rows), gres)


def _too_big(field: str, options: SlurmOptions, nodes: PartitionNodes) -> SlurmRefused:
    asked = [f"{options.cpus_per_worker} CPU(s)"]
    if options.mem_per_worker_mb is not None:
        asked.append(f"{options.mem_per_worker_mb} MB")
    if options.gres:
        asked.append(f"gres {options.gres}")
    return SlurmRefused(f"eval.slurm.{field}: no node of partition "
                        f"{options.partition or '(default)'} can hold one worker "
                        f"({', '.join(asked)}); {nodes}")


def _unsatisfiable(options: SlurmOptions, job: BatchJob) -> SlurmRefused:
    """Slurm says no node fits: the field at fault, first the ones check_fits knows."""
    try:
        check_fits(options, job)
    except SlurmRefused as exc:
        return exc
    nodes = _partition_nodes(options.partition)
    return _too_big("gres" if options.gres else "extra_args", options, nodes)


def _count(text: str) -> int | None:
    """sinfo's count (``4``, ``4+`` where nodes differ): its number, None if not one."""
    text = text.rstrip("+")
    return int(text) if text.isdigit() else None


def _partitions() -> list[str]:
    try:
        return check_controller()
    except SlurmError:
        return []


def _node_gres(partition: str | None) -> str:
    return _partition_nodes(partition).gres
