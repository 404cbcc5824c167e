"""EpisodeReplay: one ``ep{NNNN}/`` dir as steps, firings, errors and frames.

Everything comes from the episode dir alone (episode.json, log.jsonl, assets/), so a dir
copied anywhere replays. Steps in log.jsonl never decrease (episode_start is step 0,
then each step's firings, then episode_end), so the first line of a step is found by
bisecting the line index, parsing ~log2(lines) lines instead of the whole log. Frames are
:class:`~evaltui.runview.frames.FrameRef` values (a PNG, or a record of frames.bin).

Files are opened without following a symlink out of the run dir when the ep dir sits in
one (``RUN/episodes/epNNNN``), else out of the ep dir (:mod:`evaltui.rundir.safeopen`). Once the
episode is over (episode.json exists), a last log line cut short is shown as a ``torn``
firing of the last step rather than dropped.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from evaltui.contract.records import EPISODE_FILENAME, LOG_FILENAME
from evaltui.rundir.safeopen import LeavesRoot, kind_inside, read_json_inside
from evaltui.runview.frames import FrameRef, record_frames
from evaltui.runview.logindex import LineIndex

FIRINGS_PER_STEP_LIMIT = 500
"""A step with more records than this shows the first ones and says how many were left."""
ERROR_STEPS_LIMIT = 10_000
"""Each error's step costs one line read: a log of nothing but errors stays cheap."""
_FRAME_LOOKBACK_STEPS = 64
_STEP_CACHE_MAX = 8192


@dataclass(frozen=True)
class Firing:
    """One log record of a step, with its line number in log.jsonl."""

    line: int
    record: dict[str, Any]

    @property
    def event(self) -> str:
        return str(self.record.get("event", "?"))

    @property
    def is_error(self) -> bool:
        return self.event in ("error", "corrupt", "torn", "unreadable")


class EpisodeReplay:
    """Random access to one episode's log by step, built on a lazy :class:`LineIndex`."""

    def __init__(self, ep_dir: Path) -> None:
        self.ep_dir = Path(ep_dir)
        in_run = self.ep_dir.parent.name == "episodes"
        self.root = self.ep_dir.absolute().parents[1] if in_run else self.ep_dir
        """Nothing is read through a symlink out of it: the run dir, or a lone ep dir."""
        self.index = LineIndex(self.ep_dir / LOG_FILENAME, root=self.root)
        self.episode: dict[str, Any] = {}
        self.episode_error: str | None = None
        """Why episode.json could not be used (the replay still works from the log)."""
        self.finished = False
        """episode.json exists (usable or not): the log is complete."""
        self._steps: dict[int, int] = {}
        self.load_episode()

    def load_episode(self) -> None:
        """(Re)read episode.json; a missing or corrupt one is noted, not raised."""
        path = self.ep_dir / EPISODE_FILENAME
        self.finished = True
        why: str | None
        try:
            data = read_json_inside(self.root, path)
        except (FileNotFoundError, NotADirectoryError):
            self.finished = False
            why = "episode.json not written yet"
        except LeavesRoot:
            where = "the run dir" if self.root != self.ep_dir else "the episode dir"
            what = "" if self._dir_leaves() else "episode.json is "
            why = f"{what}unreadable (symlink leaves {where})"
        except (OSError, orjson.JSONDecodeError) as exc:
            why = f"episode.json is unreadable: {exc}"
        else:
            why = None if isinstance(data, dict) else "episode.json is not a JSON object"
        self.episode, self.episode_error = (data, None) if why is None else ({}, why)

    # --- steps ---------------------------------------------------------------------------

    def step_of(self, line: int) -> int:
        """The step of line ``line``; a corrupt line takes the step of the line before it."""
        cached = self._steps.get(line)
        if cached is not None:
            return cached
        step = 0
        for i in range(line, max(-1, line - 16), -1):
            value = self.index.record(i).get("step")
            if isinstance(value, int) and not isinstance(value, bool):
                step = value
                break
        if len(self._steps) >= _STEP_CACHE_MAX:
            self._steps.clear()
        self._steps[line] = step
        return step

    @property
    def last_step(self) -> int:
        """The highest step indexed so far (0 for an empty log)."""
        return self.step_of(len(self.index) - 1) if len(self.index) else 0

    def first_line_of(self, step: int) -> int:
        """The first line whose step is >= ``step`` (``len(index)`` if none)."""
        return bisect_left(range(len(self.index)), step, key=self.step_of)

    def step_lines(self, step: int) -> range:
        """Line numbers of the records of ``step``."""
        return range(self.first_line_of(step), self.first_line_of(step + 1))

    def firings(self, step: int, limit: int = FIRINGS_PER_STEP_LIMIT) -> tuple[list[Firing], int]:
        """The records of ``step`` (at most ``limit``) and how many there are in all; the
        last step ends with the torn last line, if any."""
        lines = self.step_lines(step)
        shown = lines[:limit]
        records = self.index.records(shown.start, shown.stop) if len(shown) else []
        firings = [Firing(i, r) for i, r in zip(shown, records, strict=True)]
        torn = self.torn_firing() if step == self.last_step else None
        if torn is not None:
            if len(firings) < limit:
                firings.append(torn)
            return firings, len(lines) + 1
        return firings, len(lines)

    def torn_firing(self) -> Firing | None:
        """The last log line of a finished episode that has no newline, as a ``torn``
        record (while the episode runs, it is a line mid-append: None); or, when log.jsonl
        was refused (a symlink out of the root), an ``unreadable`` record saying so."""
        if self.index.refused is not None:
            where = "the run dir" if self.root != self.ep_dir else "the episode dir"
            return Firing(0, {"event": "unreadable", "error": f"log.jsonl is unreadable "
                              f"(symlink leaves {where}); not read"})
        if not self.finished:
            return None
        try:
            record = self.index.torn()
        except OSError:
            return None
        return Firing(len(self.index), record) if record is not None else None

    def _dir_leaves(self) -> bool:
        """The ep dir itself is a symlink out of the run dir (nothing of it is read)."""
        try:
            kind_inside(self.root, self.ep_dir.absolute().relative_to(self.root))
        except LeavesRoot:
            return True
        except (OSError, ValueError):
            return False
        return False

    # --- errors --------------------------------------------------------------------------

    def error_steps(self, limit: int = ERROR_STEPS_LIMIT) -> list[int]:
        """Steps that hold an ``error`` record (or the torn last line), ascending (the first
        ``limit`` errors')."""
        steps = {self.step_of(i) for i in self.index.error_lines()[:limit]}
        if self.torn_firing() is not None:
            steps.add(self.last_step)
        return sorted(steps)

    def next_error_step(self, after_step: int) -> int | None:
        """The first error step after ``after_step``, wrapping to the first; None if none."""
        return error_step_from(self.error_steps(), after_step, 1)

    # --- frames --------------------------------------------------------------------------

    def frame_of(self, step: int) -> FrameRef | None:
        """The frame to show at ``step``: its last frame, else the latest one before it."""
        for s in range(step, max(-1, step - _FRAME_LOOKBACK_STEPS), -1):
            firings, _ = self.firings(s)
            for firing in reversed(firings):
                frames = record_frames(self.ep_dir, firing.record)
                if frames:
                    return frames[-1]
        return None


def error_step_from(steps: Iterable[int], step: int, direction: int) -> int | None:
    """The error step after (``direction`` > 0) or before ``step``, wrapping around at the
    end; None if ``steps`` is empty."""
    ordered = sorted(steps)
    if not ordered:
        return None
    if direction > 0:
        return next((s for s in ordered if s > step), ordered[0])
    return next((s for s in reversed(ordered) if s < step), ordered[-1])
