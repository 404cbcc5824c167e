"""Where a set's members go from here, and a set cancelled whatever its target.

:func:`local_target` picks the target of a planned set (``api/settarget.open_target``
adds the backend at ``$BACKEND_URL``); :func:`cancel_set` is ``evaltui set cancel`` and
the API's cancel of a Slurm set; :func:`read_ends`, which the backend's driver also
follows a cancelled set with.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from evaltui.contract.setspec import MemberState, SetRecord
from evaltui.engine.executor.kinds import executor_kind
from evaltui.sets.arraytarget import SlurmArrayTarget
from evaltui.sets.plan import SetPlan
from evaltui.sets.runner import SetRunner
from evaltui.sets.setdir import SetBusy, hold_set, read_set, write_set
from evaltui.sets.targets import EmbeddedTarget, SetTarget, TargetError


def local_target(plan: SetPlan, outputs: str | os.PathLike[str] | None, *,
                 say: Callable[[str], Any] | None = None) -> SetTarget:
    """Slurm job arrays when the set's executor is a batch system's (``base.executor:
    slurm``; ``say`` told of each array), else a scheduler embedded in this process."""
    if executor_kind(plan.setfile.base.executor).batch:
        return SlurmArrayTarget.of_plan(plan, outputs, say=say)
    return EmbeddedTarget.start(outputs)


def cancel_set(plan: SetPlan, target: SetTarget) -> int:
    """Cancel every queued or running member through the set's runner, close the target
    (an array target waits there for its tasks to leave Slurm's queue), then read each
    member's end into set.json, unless a ``set run`` following the set holds it (that one
    writes it). How many members' runs were asked; SetDirError when set.json cannot be
    read."""
    runner = SetRunner(plan.expansion, plan.path, target, set_id=plan.set_id)
    record = runner.record = read_set(plan.path)
    try:
        asked = runner.cancel()
    finally:
        target.close()
    with suppress(SetBusy), hold_set(plan.path):  # SetBusy: the `set run` following it
        if read_ends(record, target):              # writes set.json
            write_set(plan.path, record)
    return asked


def read_ends(record: SetRecord, target: SetTarget) -> bool:
    """Read every unfinished member's run into ``record`` (nothing is submitted); True
    when a state changed."""
    changed = False
    for rec in record.members:
        if rec.run_id is None or rec.state.finished:
            continue
        try:
            state = MemberState(target.get_run(rec.run_id).state.value)
        except TargetError:
            continue
        if state is not rec.state:
            rec.state, changed = state, True
    return changed
