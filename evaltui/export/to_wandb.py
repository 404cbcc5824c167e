"""``evaltui export RUN --to wandb --project P [--dir D]``: one W&B run per run dir.

The run's W&B id is :func:`payload.run_key` and it is opened with ``resume="allow"``, so
a second export (or a sync of two offline exports) goes into the same run: the summary
and config are overwritten, and history steps already logged are not logged again (W&B
drops a step lower than the run's last). Config is the spec; the summary holds
``<metric>`` (+ ``/ci95_low``, ``/ci95_high``, ``/n``) and the counts; the history holds
``running_mean/<metric>`` with ``episodes`` (finished) as the step, and at the last step
the ``episode_rows`` table and ``media/epNNNN`` GIFs. ``WANDB_MODE=offline`` works as usual.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import wandb

from evaltui.export import payload
from evaltui.export.setmember import CHECKPOINT_PREFIX, STEP_KEY, SetMember
from evaltui.runview.snapshot import RunSnapshot

DEFAULT_PROJECT = "evaltui"


def export(snap: RunSnapshot, *, project: str | None = None, run_name: str | None = None,
           directory: Path | None = None, member: SetMember | None = None) -> str:
    """Log the run to W&B; return ``project/run_id``. A set's ``member`` goes in the
    set's group, with its axes in the config and, for a checkpoint, ``checkpoint/*``
    over ``checkpoint_step``."""
    notes = snap.notes()
    tags = ["evaltui", snap.state.value] + (["errored"] if snap.error_count else [])
    config = payload.config(snap)
    if member is not None:
        tags.append(f"set:{member.set_id}")
        config["set"] = member.config()
        run_name = member.name(run_name)
    if directory is not None:
        Path(directory).mkdir(parents=True, exist_ok=True)
    run = wandb.init(
        project=project or DEFAULT_PROJECT, id=payload.run_key(snap),
        name=payload.run_name(snap, run_name), dir=None if directory is None else str(directory),
        config=config, resume="allow", tags=tags,
        group=member.set_id if member is not None else None,
        notes="\n".join(notes) or None, job_type="eval",
        settings=wandb.Settings(console="off", silent=True, x_disable_stats=True,
                                save_code=False))
    try:
        run.config.update(config, allow_val_change=True)
        if member is not None and member.step is not None:
            run.define_metric(STEP_KEY)
            run.define_metric(f"{CHECKPOINT_PREFIX}*", step_metric=STEP_KEY)
        values = payload.summary_values(snap)
        last = int(values.get("episodes", 0))
        by_step: dict[int, dict[str, float]] = {}
        for metric, points in payload.series(snap).items():
            for p in points:
                row = by_step.setdefault(p.episodes, {})
                row[f"running_mean/{metric}"] = p.mean
                if p.low is not None and p.high is not None:
                    row[f"running_mean/{metric}/ci95_low"] = p.low
                    row[f"running_mean/{metric}/ci95_high"] = p.high
        for step in sorted(by_step):
            if step < last:
                run.log(by_step[step], step=step)
        columns, rows = payload.table(snap)
        final: dict[str, object] = {**by_step.get(last, {}),
                                    "episode_rows": wandb.Table(columns=columns, data=rows)}
        if member is not None and member.step is not None:
            final.update({STEP_KEY: member.step, **member.checkpoint_values(snap)})
        with tempfile.TemporaryDirectory(prefix="evaltui-wandb-") as tmp:
            for index, gif in payload.write_gifs(snap, Path(tmp)).items():
                final[f"media/ep{index:04d}"] = wandb.Video(str(gif), format="gif",
                                                            caption=f"episode {index}")
            run.log(final, step=last)  # copies the GIFs into the run dir before tmp goes
        run.summary.update({**values, "notes": "\n".join(notes) or "no errors; run finished"})
        where = f"{run.project}/{run.id}"
    finally:
        run.finish()
        # finish() returns before wandb's core process has flushed the run's file; its
        # teardown waits for that (an exported run is complete when the command ends).
        wandb.teardown()
    return where
