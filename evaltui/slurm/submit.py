"""Submitting a run to Slurm: the sbatch command line from ``eval.slurm`` and what the job
runs, the submission, and a dry check (``sbatch --test-only``) whose refusal is one line
naming the field at fault."""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evaltui.slurm.commands import SlurmError, error_line, run_slurm
from evaltui.slurm.jobid import SlurmJobId, parse_parsable
from evaltui.slurm.options import SlurmOptions

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
    """Submit; the job's id (an array's: its array job id). SlurmRefused, one line."""
    done = run_slurm(sbatch_argv(options, job), check=False)
    if done.returncode != 0:
        raise refusal(options, error_line(done.stderr))
    return parse_parsable(done.stdout)


def check_submittable(options: SlurmOptions, job: BatchJob) -> str:
    """Ask Slurm whether it would take the job, submitting nothing: Slurm's answer
    (``Job 9 to start at ... on nodes n1 in partition main``), or SlurmRefused."""
    done = run_slurm(sbatch_argv(options, job, test_only=True), check=False)
    if done.returncode != 0:
        raise refusal(options, error_line(done.stderr))
    return error_line(done.stderr)  # sbatch --test-only answers on stderr


def refusal(options: SlurmOptions, line: str) -> SlurmRefused:
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
        return _unsatisfiable(options)
    if "time limit" in low or "--time" in low:
        return SlurmRefused(f"eval.slurm.time: {line}")
    return SlurmRefused(f"Slurm refused the job: {line}")


def _unsatisfiable(options: SlurmOptions) -> SlurmRefused:
    """No node can hold one worker as asked: name the first field beyond every node of
    the partition (as sinfo reports them), with what the nodes have."""
    argv = ["sinfo", "--noheader", "--format=%c|%m|%G"]
    if options.partition:
        argv.append(f"--partition={options.partition}")
    try:
        rows = [ln.split("|") for ln in run_slurm(argv).stdout.split()]
    except SlurmError:
        rows = []
    cpus = max((int(r[0].rstrip("+")) for r in rows if r[0].rstrip("+").isdigit()), default=0)
    mem = max((int(r[1].rstrip("+")) for r in rows if r[1].rstrip("+").isdigit()), default=0)
    gres = ", ".join(sorted({r[2] for r in rows if len(r) > 2} - {"(null)"})) or "no gres"
    asked = [f"{options.cpus_per_worker} CPU(s)"]
    if options.mem_per_worker_mb is not None:
        asked.append(f"{options.mem_per_worker_mb} MB")
    if options.gres:
        asked.append(f"gres {options.gres}")
    if cpus and options.cpus_per_worker > cpus:
        field = "cpus_per_worker"
    elif mem and options.mem_per_worker_mb is not None and options.mem_per_worker_mb > mem:
        field = "mem_per_worker_mb"
    else:
        field = "gres" if options.gres else "extra_args"
    return SlurmRefused(
        f"eval.slurm.{field}: no node of partition {options.partition or '(default)'} can "
        f"hold one worker ({', '.join(asked)}); the largest has {cpus} CPUs, {mem} MB, "
        f"gres: {gres}")


def _partitions() -> list[str]:
    try:
        done = run_slurm(["sinfo", "--noheader", "--format=%R"])
    except SlurmError:
        return []
    return sorted(set(done.stdout.split()))


def _node_gres(partition: str | None) -> str:
    """``gpu:2`` ... as sinfo reports the nodes' gres; ``no gres`` when none."""
    argv = ["sinfo", "--noheader", "--format=%G"]
    if partition:
        argv.append(f"--partition={partition}")
    try:
        found = set(run_slurm(argv).stdout.split())
    except SlurmError:
        return "unknown"
    found.discard("(null)")
    return ", ".join(sorted(found)) or "no gres"

