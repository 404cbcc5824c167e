"""Submit a set's members and follow them to the end: idempotent, with retries.

:meth:`SetRunner.prepare` merges the expansion with the set.json already there (a
member is known by its key): ``done`` members are reused, members new to the file start
``pending``, members that ended ``failed``/``aborted``/``cancelled`` are due again. Each
:meth:`SetRunner.step` reads every unfinished member's run and acts:

- ``pending``: submitted, unless ``max_error_rate`` of the members has failed already
  (then it stays pending, held back, and says so);
- ended ``failed``/``aborted`` (or due again from an earlier call): resumed -- the
  scheduler re-runs only the episodes that are not ok, into the same run dir -- or
  submitted afresh when there is nothing to resume, after a back-off that doubles per
  attempt, at most ``retries`` times after its first attempt of this call;
- a member cancelled while this call follows it stays cancelled (``set cancel``);
- with ``max_parallel`` (``set run --max-parallel N``), a pending or due member waits
  while N members are queued, starting or running: a cap on top of the scheduler's own
  admission (which already bounds what shares the machine by its memory and cores);
- in a racing set (``race:``), once every racing member's round is done, the race
  (:mod:`evaltui.sets.racing`) eliminates and queues the survivors' next round.

set.json is written after every step that changed something, and every half second
while a step submits, so a crash loses at most that half second of submissions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltui.contract.setspec import SET_FILENAME, MemberState, SetMemberRecord, SetRecord
from evaltui.contract.states import RunState
from evaltui.contract.views import Run
from evaltui.sets.expansion import Expansion, Member
from evaltui.sets.racing import SetRace
from evaltui.sets.setdir import read_set, write_set
from evaltui.sets.targets import ResumeRefused, RunGone, SetTarget, TargetError

FAILED = (MemberState.FAILED, MemberState.ABORTED)
MAX_BACKOFF_SEC = 60.0
SAVE_EVERY_SEC = 0.5
"""While submitting, set.json is written at least this often (and after every step)."""


@dataclass(frozen=True)
class RunnerOptions:
    """How ``set run`` treats failures."""

    retries: int = 0
    """Attempts after the first, per member and per call, for failed/aborted members."""
    max_error_rate: float | None = None
    """Stop submitting once this share of the members has failed (None: never stop)."""
    backoff_sec: float = 2.0
    """Wait before the first retry of a member; doubled for each further one."""
    poll_sec: float = 0.5
    max_parallel: int | None = None
    """Members in flight (queued, starting, running) at most (None: no cap)."""


@dataclass
class MemberLive:
    """What the follow lines show of a member between two steps."""

    record: SetMemberRecord
    run: Run | None = None
    note: str | None = None
    """Why it waits: the scheduler's waiting reason, a back-off, a hold."""


@dataclass
class _Turn:
    """This call's attempts at one member."""

    tries: int = 0
    retry_at: float | None = None
    final: bool = False


class SetRunner:
    """Drives one set through ``target``; ``on_change`` gets the live members after each
    step that changed something."""

    def __init__(self, expansion: Expansion, set_path: Path, target: SetTarget, *,
                 set_id: str, options: RunnerOptions | None = None,
                 on_change: Callable[[list[MemberLive]], None] | None = None) -> None:
        self.expansion = expansion
        self.path = Path(set_path)
        self.target = target
        self.set_id = set_id
        self.options = options or RunnerOptions()
        self.on_change = on_change
        self.record: SetRecord | None = None
        self._turns: dict[str, _Turn] = {}
        self._live: dict[str, MemberLive] = {}
        self._specs: dict[str, Member] = {m.key: m for m in expansion.members}
        self._read_once: set[str] = set()
        self._saved_at = 0.0
        self.held = False
        """True once ``max_error_rate`` stopped the submitting."""
        self._made: dict[str, str] | None = None
        """Runs submitted for this set before (token -> run id), read at the first submit."""
        race = expansion.setfile.race
        self.race = SetRace(race) if race is not None else None

    # ---- set.json -----------------------------------------------------------------------
    def prepare(self, file: dict) -> SetRecord:
        """Merge the expansion with the set.json there (if any) and write it."""
        old: dict[str, SetMemberRecord] = {}
        if (self.path / SET_FILENAME).is_file():
            old = {m.key: m for m in read_set(self.path).members}
        members = []
        for m in self.expansion.members:
            rec = old.get(m.key) or SetMemberRecord(key=m.key, axes=m.axes)
            rec.axes = m.axes
            members.append(rec)
            self._live[m.key] = MemberLive(rec)
            self._turns[m.key] = _Turn()
        self.record = SetRecord(set_id=self.set_id, name=self.expansion.setfile.name,
                                file=file, base_dir=str(self.expansion.base_dir),
                                members=members)
        self._save()
        return self.record

    def add_members(self, new: list[Member]) -> None:
        """Members found after ``prepare`` (``set watch``: new checkpoints), in order."""
        assert self.record is not None
        added = False
        for m in new:
            if m.key in self._specs:
                continue
            self._specs[m.key] = m
            rec = SetMemberRecord(key=m.key, axes=m.axes)
            self.record.members.append(rec)
            self._live[m.key] = MemberLive(rec)
            self._turns[m.key] = _Turn()
            added = True
        if added:
            self._save()

    def _save(self) -> None:
        assert self.record is not None
        write_set(self.path, self.record)
        self._saved_at = time.monotonic()

    # ---- the loop -----------------------------------------------------------------------
    def run(self, *, detach: bool = False, until: Callable[[], bool] | None = None) -> SetRecord:
        """Submit what is due, then (unless ``detach``) step until every member is
        settled or ``until()`` is true."""
        self.step()
        while not detach and not self.settled() and not (until and until()):
            time.sleep(self.options.poll_sec)
            self.step()
        assert self.record is not None
        return self.record

    def settled(self) -> bool:
        """Every member done, given up on, cancelled, or held back."""
        return all(self._settled(rec) for rec in self._members())

    def step(self) -> None:
        """Read every unfinished member's run, then submit or retry what is due."""
        changed = False
        for rec in self._members():
            # A done member is read once (its run dir may have been deleted since).
            if rec.run_id is not None and (rec.state is not MemberState.DONE
                                           or rec.key not in self._read_once):
                self._read_once.add(rec.key)
                changed |= self._refresh(rec)
        for rec in self._members():
            changed |= self._act(rec)
        if self.race is not None and self.race.step(self._members(), self.target,
                                                    self._given_up, self._note):
            assert self.record is not None
            self.record.race, changed = self.race.standing, True
        self.target.flush()  # a target sending in batches sends this step's
        if changed:
            self._save()
        if self.on_change is not None:
            self.on_change([self._live[r.key] for r in self._members()])

    def live(self) -> list[MemberLive]:
        return [self._live[r.key] for r in self._members()]

    def _members(self) -> list[SetMemberRecord]:
        assert self.record is not None
        return self.record.members

    def _settled(self, rec: SetMemberRecord) -> bool:
        turn = self._turns[rec.key]
        if rec.state is MemberState.DONE:
            return True
        if rec.state is MemberState.PENDING:
            return self.held
        return rec.state.finished and (turn.final or self.held)

    def _given_up(self, rec: SetMemberRecord) -> bool:
        """Ended without ``done`` and not retried any more (or held back)."""
        return rec.state is not MemberState.DONE and self._settled(rec)

    def _note(self, rec: SetMemberRecord, text: str) -> None:
        self._live[rec.key].note = text

    def _refresh(self, rec: SetMemberRecord) -> bool:
        live = self._live[rec.key]
        assert rec.run_id is not None
        try:
            run = self.target.get_run(rec.run_id)
        except RunGone as exc:  # its run dir was deleted: the member starts over
            rec.run_id, rec.run_dir, rec.state = None, None, MemberState.PENDING
            live.run, live.note = None, f"{exc} any more: submitted again"
            return True
        except TargetError as exc:
            live.note = str(exc)
            return False
        live.run = run
        rec.run_dir = str(run.run_dir)
        live.note = run.waiting_reason if run.state is RunState.QUEUED else None
        state = MemberState(run.state.value)
        if state is rec.state:
            return False
        rec.state = state
        turn = self._turns[rec.key]
        if state in FAILED:
            rec.error = _failure(run)
            if turn.tries > self.options.retries:
                turn.final = True
            else:
                delay = self.options.backoff_sec * 2 ** max(0, turn.tries - 1)
                turn.retry_at = time.monotonic() + min(delay, MAX_BACKOFF_SEC)
        elif state is MemberState.CANCELLED and turn.tries:
            turn.final = True  # cancelled while this call followed it: `set cancel`
        elif state is MemberState.DONE:
            rec.error = None
        return True

    def _act(self, rec: SetMemberRecord) -> bool:
        turn = self._turns[rec.key]
        live = self._live[rec.key]
        if rec.state is MemberState.PENDING:
            if self._error_rate_reached():
                self.held = True
                live.note = (f"held back: {self._failed()} of {len(self._members())} members "
                             f"failed (--max-error-rate {self.options.max_error_rate:g})")
                return False
            return False if self._capped(live) else self._submit(rec, turn)
        if not rec.state.finished or rec.state is MemberState.DONE or turn.final:
            return False
        if self._error_rate_reached():
            self.held = True
            return False
        if turn.tries > self.options.retries:
            turn.final = True
            return False
        if turn.retry_at is not None and time.monotonic() < turn.retry_at:
            live.note = f"retrying in {turn.retry_at - time.monotonic():.0f} s"
            return False
        return False if self._capped(live) else self._retry(rec, turn)

    def _capped(self, live: MemberLive) -> bool:
        """Whether ``max_parallel`` members are in flight (``live`` then says so)."""
        cap = self.options.max_parallel
        if cap is None:
            return False
        flying = sum(1 for r in self._members()
                     if r.state is not MemberState.PENDING and not r.state.finished)
        if flying < cap:
            return False
        live.note = f"waits: {flying} members in flight (--max-parallel {cap})"
        return True

    def _submit(self, rec: SetMemberRecord, turn: _Turn) -> bool:
        member = self._specs[rec.key]
        # The submission's token is known before the submit and found in the run's spec
        # after it: a runner killed in between adopts that run instead of a second one.
        token = f"{rec.key}#{rec.attempts}"
        rec.attempts += 1
        if self._made is None:
            self._made = self.target.member_runs(self.set_id)
        adopted = self._made.pop(token, None)
        if adopted is None:
            turn.tries += 1  # an adopted run was the killed call's attempt, not this one's
        try:
            rec.run_id = adopted or self.target.submit(_tagged(member.spec, token))
        except (TargetError, ValueError) as exc:
            rec.state, rec.error = MemberState.FAILED, f"not submitted: {exc}"
            turn.final = turn.tries > self.options.retries
            return True
        rec.state, rec.error, turn.retry_at = MemberState.QUEUED, None, None
        self._live[rec.key].run = None
        # Soon: a crash must not lose which run is this member's. Not after every one of
        # a thousand submits, though (set.json grows with the set): twice a second.
        if time.monotonic() - self._saved_at >= SAVE_EVERY_SEC:
            self._save()
            return False
        return True

    def _retry(self, rec: SetMemberRecord, turn: _Turn) -> bool:
        if rec.run_id is None:
            return self._submit(rec, turn)
        try:
            self.target.resume(rec.run_id)
        except ResumeRefused:
            return self._submit(rec, turn)  # nothing to resume: a fresh run
        except TargetError as exc:
            self._live[rec.key].note = str(exc)
            return False
        turn.tries += 1
        rec.attempts += 1
        rec.state, turn.retry_at = MemberState.QUEUED, None
        return True

    def _failed(self) -> int:
        return sum(1 for r in self._members() if r.state in FAILED)

    def _error_rate_reached(self) -> bool:
        rate = self.options.max_error_rate
        members = self._members()
        return rate is not None and bool(members) and self._failed() / len(members) > rate

    # ---- cancel -------------------------------------------------------------------------
    def cancel(self) -> int:
        """Cancel every member's queued or running run; how many were asked."""
        asked = 0
        for rec in self._members():
            if rec.run_id is not None and not rec.state.finished:
                with suppress(TargetError):
                    self.target.cancel(rec.run_id)
                    asked += 1
        return asked


def _tagged(spec: dict[str, Any], token: str) -> dict[str, Any]:
    """``spec`` with ``scheduling.set_member`` = ``token``."""
    return {**spec, "scheduling": {**(spec.get("scheduling") or {}), "set_member": token}}


def _failure(run: Run) -> str:
    summary, record = run.summary, run.scheduler
    why = (summary and summary.error) or (record and record.error) or run.error
    return f"{run.state.value}: {why}" if why else run.state.value
