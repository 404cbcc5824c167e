"""A run exported as a member of a set: what the trackers add to its run.

``evaltui export SET_DIR`` exports each member's run as ``evaltui export RUN_DIR`` does,
plus this: the set it belongs to (W&B group, MLflow parent run and tags, TensorBoard
folder ``[PROJECT/]SET_ID/``), its axis values as config, and for a checkpoint axis its
step, at which its summary metrics are logged again as ``checkpoint/<metric>``, so a
tracker draws each metric over the checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evaltui.contract.setspec import member_label
from evaltui.export import payload
from evaltui.runview.snapshot import RunSnapshot

CHECKPOINT_PREFIX = "checkpoint/"
STEP_KEY = "checkpoint_step"


@dataclass(frozen=True)
class SetMember:
    """The member of set ``set_id`` with ``axes``; ``step`` its checkpoint's step."""

    set_id: str
    key: str
    axes: dict[str, Any]
    step: int | None = None

    @property
    def label(self) -> str:
        """Its axis values (the step's checkpoint file named by its step alone)."""
        return member_label(self.axes, step_names_checkpoint=self.step is not None)

    def name(self, given: str | None) -> str:
        return given or f"{self.set_id} {self.label}"

    def config(self) -> dict[str, Any]:
        return {"set_id": self.set_id, "member_key": self.key, "axes": self.axes}

    def group_label(self) -> str:
        """The member's axes other than the checkpoint's: its line in a plot over steps."""
        others = {k: v for k, v in self.axes.items() if k not in ("checkpoint", "step")}
        return " ".join(f"{k}={v}" for k, v in others.items()) or "all"

    def checkpoint_values(self, snap: RunSnapshot) -> dict[str, float]:
        """``checkpoint/<metric>`` of the summary's means (none without a step)."""
        if self.step is None:
            return {}
        values = payload.summary_values(snap)
        return {f"{CHECKPOINT_PREFIX}{k}": float(v) for k, v in values.items()
                if k in (snap.summary.get("metrics") or {})}
