"""A run dir from a spec in one call, as the tests start runs without a scheduler: the
engine's spec check (raising SpecError, writing nothing), then ``launch.write_run``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaltui.contract.states import RunState
from evaltui.engine.graph.specchecks import CheckedSpec, validate_spec
from evaltui.rundir.store import write_run


def prepare_run(spec_data: Any, outputs: Path, *, state: RunState = RunState.QUEUED,
                record_extra: Mapping[str, Any] | None = None) -> tuple[Path, CheckedSpec]:
    """Validate (raising SpecError), then allocate the run dir and write its records."""
    checked = validate_spec(spec_data)
    return write_run(checked, outputs, state=state, record_extra=record_extra), checked
