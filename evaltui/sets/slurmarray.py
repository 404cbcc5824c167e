"""A set's Slurm job arrays, the parts :class:`~evaltui.sets.arraytarget.SlurmArrayTarget`
sends them with (docs/slurm.md, "Sets as job arrays").

One ``sbatch --array=I,J,...%P`` per submission: array task ``i`` is member ``i`` of
set.json, a complete run in its own run dir (its workers are job steps of that task's
allocation). The set dir's ``slurm_array.json`` (:class:`ArrayManifest`) maps each task
id to its run dir and the array job that runs it; the task's batch step
(:mod:`evaltui.sets.slurmtask`) reads it. An array is submitted held
(:func:`submit_held`) and released (:func:`release`) once what its tasks run exists.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaltui.contract.slurmoptions import SlurmOptions
from evaltui.rundir.jsonfiles import read_json, write_json_atomic
from evaltui.slurm.commands import run_slurm
from evaltui.slurm.submit import BatchJob, submit

ARRAY_FILENAME = "slurm_array.json"
"""In the set dir: task id -> run dir and array job (:class:`ArrayManifest`)."""
LOG_DIRNAME = "slurm"
"""In the set dir: each task's Slurm output before its run takes over (``%A_%a.log``)."""


@dataclass
class ArrayTask:
    run_dir: str
    job: str
    """The array job id that runs (or ran) it; the task's id is ``{job}_{index}``."""
    key: str
    """The member's key (set.json's): a task id stays its member's if the file changes."""


@dataclass
class ArrayManifest:
    """``slurm_array.json``: every member submitted so far, by its task id (its index in
    set.json), and the array jobs submitted, oldest first."""

    tasks: dict[int, ArrayTask] = field(default_factory=dict)
    jobs: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, set_path: Path) -> ArrayManifest:
        """The manifest of a set dir; empty when it has none."""

        try:
            data = read_json(Path(set_path) / ARRAY_FILENAME)
        except FileNotFoundError:
            return cls()
        tasks = {int(k): ArrayTask(str(v["run_dir"]), str(v["job"]), str(v["key"]))
                 for k, v in dict(data.get("tasks") or {}).items()}
        return cls(tasks, [str(j) for j in data.get("jobs") or []])

    def write(self, set_path: Path) -> None:

        write_json_atomic(Path(set_path) / ARRAY_FILENAME, {
            "tasks": {str(i): {"run_dir": t.run_dir, "job": t.job, "key": t.key}
                      for i, t in sorted(self.tasks.items())},
            "jobs": self.jobs})

    def task_id(self, index: int) -> str:
        return f"{self.tasks[index].job}_{index}"

    def index_of(self, key: str) -> int:
        """The task id of the member ``key``: its own, or the next free one."""
        for index, task in self.tasks.items():
            if task.key == key:
                return index
        return max(self.tasks, default=-1) + 1


def array_range(indices: Sequence[int], parallelism: int) -> str:
    """``--array`` of these task ids, at most ``parallelism`` at once: ``0-5%2``,
    ``1,3-4%2`` (Slurm takes lists of ids and ranges)."""
    ordered = sorted(set(indices))
    parts: list[str] = []
    start = prev = ordered[0]
    for i in [*ordered[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return f"{','.join(parts)}%{parallelism}"


def member_slurm(specs: Sequence[dict[str, Any]]) -> SlurmOptions:
    """The one ``eval.slurm`` of these members (an array's tasks share their options);
    ValueError naming the field when members ask for different ones."""
    options = [SlurmOptions.model_validate(dict(s.get("eval") or {}).get("slurm") or {})
               for s in specs]
    if any(o != options[0] for o in options[1:]):
        raise ValueError("members ask for different eval.slurm options; one array has one "
                         "set of sbatch options (give them in base.slurm)")
    return options[0]


def array_tasks(specs: Sequence[dict[str, Any]]) -> int:
    """``--ntasks`` of each task: the most workers a member runs at once."""
    most = 1
    for spec in specs:
        ev = dict(spec.get("eval") or {})
        workers = int(ev.get("worker_count") or 1)
        episodes = ev.get("episode_indices")
        count = len(episodes) if isinstance(episodes, list) else ev.get("episode_count")
        most = max(most, min(workers, int(count)) if count else workers)
    return most


def submit_held(set_path: Path, set_id: str, indices: Sequence[int], options: SlurmOptions,
                tasks: int, parallelism: int) -> str:
    """sbatch the array of ``indices``, held; its array job id. SlurmError (one line)
    when Slurm refuses it; nothing is written then."""

    set_path = Path(set_path)
    job = BatchJob(command=[sys.executable, "-m", "evaltui.sets.slurmtask",
                            str(set_path / ARRAY_FILENAME)],
                   job_name=f"evaltui-set-{set_id}",
                   output=set_path / LOG_DIRNAME / "%A_%a.log", tasks=tasks,
                   array=array_range(indices, parallelism), chdir=set_path)
    held = options.model_copy(update={"extra_args": [*options.extra_args, "--hold"]})
    return str(submit(held, job))


def release(job: str) -> None:
    """Let the held array's tasks start."""

    run_slurm(["scontrol", "release", job])
