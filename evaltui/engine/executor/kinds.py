"""The executors a spec's ``eval.executor`` names, and what differs between them: one table,
asked wherever the choice matters (the run process, the spec check, admission, ``eval``,
sets, the TUI's form). How each builds its :class:`~evaltui.engine.executor.protocol.
EpisodeExecutor` is the run's (``engine/run/runner.py``, by the same names).

Only the standard library and Slurm's command lookup here: the CLI and the run process
read it before anything heavy, and Ray is never imported to ask about it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evaltui.slurm.commands import SlurmUnavailable, require_commands


@dataclass(frozen=True)
class ExecutorKind:
    """One executor."""

    name: str
    label: str
    """What it is, in a line (the TUI's choice, the CLI's help)."""
    workers_elsewhere: bool
    """Its workers are not children of the run process (actors, job steps): no zygote."""
    batch: bool
    """A Slurm job: outside an allocation a run is submitted from here (Slurm schedules it,
    not admission), a set's members go as one job array, the batch step requeues itself,
    and the allocation's GPUs are the run's."""
    missing: Callable[[], str | None]
    """Why it cannot run here (None: it can)."""


def _ray_missing() -> str | None:
    try:
        found = importlib.util.find_spec("ray") is not None  # not imported: only looked up
    except (ImportError, ValueError):  # a broken or blocked install
        found = False
    return None if found else \
        "ray is not installed here: install evaltui[ray] (pip install 'evaltui[ray]')"


def _slurm_missing() -> str | None:
    try:
        require_commands()
    except SlurmUnavailable as exc:
        return str(exc)
    return None


EXECUTORS: dict[str, ExecutorKind] = {kind.name: kind for kind in (
    ExecutorKind("local", "local: worker processes here", False, False, lambda: None),
    ExecutorKind("ray", "ray: actors on a Ray cluster", True, False, _ray_missing),
    ExecutorKind("slurm", "slurm: one Slurm job, workers as its steps", True, True,
                 _slurm_missing))}
LOCAL = EXECUTORS["local"]


def executor_kind(name: object) -> ExecutorKind:
    """The executor ``name`` names; the local one for None or a name it does not know (the
    spec's check names that one)."""
    return EXECUTORS.get(name, LOCAL) if isinstance(name, str) else LOCAL


def executor_of(spec: Any) -> ExecutorKind:
    """The executor of a spec: a JobSpec, or its JSON as read (not yet checked)."""
    ev = getattr(spec, "eval", None)
    if ev is not None:
        return executor_kind(ev.executor)
    ev = spec.get("eval") if isinstance(spec, Mapping) else None
    return executor_kind(ev.get("executor") if isinstance(ev, Mapping) else None)
