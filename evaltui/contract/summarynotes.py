"""The notes summary.json carries beside its metrics: the first error, a wait for disk
room, the replicas of a shared nodeset, a met stop rule (:class:`SummaryHeader` in
:mod:`evaltui.contract.records` holds them)."""

from __future__ import annotations

from typing import Literal

from evaltui.contract.recordbase import RecordModel
from evaltui.contract.states import EpisodeStatus


class FirstError(RecordModel):
    """The lowest-index episode that ended in error or timeout."""

    episode_index: int
    """Its index."""
    episode_id: str | int | None = None
    """Its dataset id."""
    status: EpisodeStatus
    """``error`` or ``timeout``."""
    message: str
    """One line: a traceback's last line."""


class DiskWaitNote(RecordModel):
    """The run's writes waited for room on a full disk (DESIGN §12)."""

    path: str
    """The last path a write waited on."""
    waiting_since: str | None = None
    """While a write still waits: since when (ISO 8601); None once writes go through."""
    waited_sec: float = 0.0
    """Seconds the run process's writes waited for room, all told."""


class ReplicaNote(RecordModel):
    """One replica of a replicated shared nodeset (DESIGN §12, summary ``replicas``)."""

    gpu: str | None = None
    """The GPU it runs on (``GPU1``); None: on the host (the run saw no GPU)."""
    pid: int | None = None
    """Its host process."""
    requests: int = 0
    """Requests it served (read four times a second; a lost one keeps its last reading)."""
    state: Literal["up", "lost"] = "up"
    """``lost``: its host died while others were up; the run went on without it."""


class StoppedNote(RecordModel):
    """summary.json ``stopped``: the run's stop rule was met (DESIGN §13, docs/statistics.md)."""

    rule: str
    """``eval.stop_when`` as given."""
    n: int
    """Episodes behind the interval: a prefix of the dealing order (those in flight when
    the rule was met were finished and are counted)."""
    metric: str
    """The metric the rule is on."""
    interval: tuple[float, float]
    """The 95 % confidence sequence of the split's mean at ``n`` (valid although the run
    looked at it after every episode; not a Student-t interval)."""
    method: str
    """What the interval is (betting confidence sequence, without replacement)."""
    full_n: int
    """Episodes of the selected split: what a run to the end would have cost."""
    met_at: int | None = None
    """The n at which the rule was met."""
    decision: str | None = None
    """The threshold clauses' answers (``success>=0.8: yes``), if any."""
