"""A run adopted from a killed ``set run`` is that call's attempt, not this one's.

``set run`` SIGKILLed between a run's STARTING record and its PID leaves the run aborted,
and between the submit and set.json's save leaves set.json without the run's id. The
next ``set run`` adopts the run by its token; it must then resume it (its first attempt
in this call), not give the member up as if this call had tried and failed already.
CI saw the member given up ("aborted ... after 1 attempt(s)") 1 time in 8 before the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evaltui.contract.setspec import MemberState, SetFile
from evaltui.contract.states import RunState
from evaltui.contract.views import Run
from evaltui.sets.expansion import Expansion, Member
from evaltui.sets.runner import RunnerOptions, SetRunner


class MemoryTarget:
    """The SetTarget protocol over a dict of run states (the runner's decisions only)."""

    label = "memory"

    def __init__(self, made: dict[str, str], states: dict[str, RunState]) -> None:
        self.made, self.states = made, states
        self.submitted: list[dict[str, Any]] = []
        self.resumed: list[str] = []

    def submit(self, spec: dict[str, Any]) -> str:
        run_id = f"run{len(self.states)}"
        self.submitted.append(spec)
        self.states[run_id] = RunState.DONE
        return run_id

    def get_run(self, run_id: str) -> Run:
        return Run(run_id=run_id, state=self.states[run_id], run_dir=Path("/nowhere", run_id))

    def cancel(self, run_id: str) -> None:
        raise AssertionError("not asked")

    def resume(self, run_id: str, more: int | None = None) -> None:
        self.resumed.append(run_id)
        self.states[run_id] = RunState.DONE

    def member_runs(self, set_id: str) -> dict[str, str]:
        return dict(self.made)

    def flush(self) -> None:
        """Submits here are made at once."""

    def close(self) -> None:
        """Nothing started."""


def test_an_adopted_aborted_run_is_resumed_not_given_up(tmp_path: Path) -> None:
    member = Member(key="k1", axes={"policy.noise": 0.1}, spec={"graph": "bot"})
    expansion = Expansion(setfile=SetFile(name="s", base={"graph": "bot"}),
                          base_dir=tmp_path, members=[member], baseline=None)
    target = MemoryTarget({"k1#0": "adopted"}, {"adopted": RunState.ABORTED})
    runner = SetRunner(expansion, tmp_path / "set", target, set_id="s",
                       options=RunnerOptions(backoff_sec=0.0, poll_sec=0.01))
    runner.prepare({})
    record = runner.run()
    assert target.submitted == []  # adopted, never a second run
    assert target.resumed == ["adopted"]
    assert [(m.run_id, m.state) for m in record.members] == [("adopted", MemberState.DONE)]
