"""``resume --more [N]``: a run stopped by its rule goes on dealing its recorded order.

The spec.json of the run is rewritten (``eval.past_stop``; with N, ``eval.max_episodes`` =
the n it stopped at + N) before the run is queued again like any resume; the run process
then deals on past the met rule. The confidence sequence stays valid: it holds at every n
at once, so looking at it, stopping, and going on are all allowed (docs/statistics.md).

A run cut by ``eval.max_episodes`` in a seeded order (``eval.order_seed``, no rule met)
goes on the same way, N more episodes of its order past the cap: a racing set feeds its
members round by round like this (:mod:`evaltui.sets.racing`).
"""

from __future__ import annotations

from pathlib import Path

from evaltui.contract.records import SPEC_FILENAME
from evaltui.contract.spec import SpecError
from evaltui.contract.states import RunState
from evaltui.engine.run.stoprun import continue_past_stop
from evaltui.rundir.jsonfiles import read_json, write_json_atomic
from evaltui.rundir.summaryfile import read_summary_header
from evaltui.scheduler.core import NotResumable

RESUMABLE_MORE = (RunState.DONE,)
"""A run continues past its stop only once it ended cleanly at the stop."""


def prepare_more(run_dir: Path, state: RunState, more: int) -> None:
    """Rewrite spec.json so the resumed run deals ``more`` more episodes past its stop (0:
    to the end of its order); NotResumable if it did not stop by a rule."""
    if state not in RESUMABLE_MORE:
        raise NotResumable(f"run {run_dir.name} is {state.value}; --more continues a run "
                           "that stopped by its rule (done)")
    try:
        spec = read_json(run_dir / SPEC_FILENAME)
    except (OSError, ValueError) as exc:
        raise SpecError(SPEC_FILENAME, f"cannot read the run: {exc}") from None
    header = read_summary_header(run_dir)
    stopped = header.stopped if header is not None else None
    if not isinstance(spec, dict):
        raise NotResumable(f"run {run_dir.name}: its spec.json is not an object")
    ev = spec.get("eval") if isinstance(spec.get("eval"), dict) else {}
    if stopped is None and ev.get("order_seed") is not None \
            and isinstance(ev.get("max_episodes"), int):
        # Cut by its cap in a seeded order: the order goes on past the cap.
        write_json_atomic(run_dir / SPEC_FILENAME,
                          continue_past_stop(spec, ev["max_episodes"], more or None))
        return
    if stopped is None:
        raise NotResumable(f"run {run_dir.name} did not stop by a rule (--stop-when) nor "
                           "by --max-episodes in a seeded order: nothing to continue past")
    if stopped.n >= stopped.full_n:
        raise NotResumable(f"run {run_dir.name} ran its whole split already")
    write_json_atomic(run_dir / SPEC_FILENAME,
                      continue_past_stop(spec, stopped.n, more or None))
