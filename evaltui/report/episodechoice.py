"""``--episodes``: which episodes get a page of their own in a report.

``all`` (the default), ``none``, or a comma-separated list of indices (``3``), index
ranges (``0-99``) and statuses (``error``, ``timeout``, ``ok``, ``cancelled``), e.g.
``0-19,error``: the first twenty and every errored one. Every episode stays in the
index's table whatever is chosen; only the pages (with their frames) are limited.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from evaltui.contract.states import EpisodeStatus

_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
STATUS_WORDS = frozenset(s.value for s in EpisodeStatus) | {"unreadable"}


class EpisodeChoiceError(ValueError):
    """An ``--episodes`` value that names nothing (bad input: exit 2)."""


@dataclass(frozen=True)
class EpisodeChoice:
    """Indices, index ranges and statuses chosen; ``everything`` when all are."""

    everything: bool = True
    ranges: tuple[tuple[int, int], ...] = ()
    statuses: frozenset[str] = frozenset()

    def picks(self, row: Mapping[str, Any]) -> bool:
        if self.everything:
            return True
        index = row.get("episode_index")
        if isinstance(index, int) and any(lo <= index <= hi for lo, hi in self.ranges):
            return True
        return str(row.get("status")) in self.statuses

    def pick(self, rows: Iterable[Mapping[str, Any]]) -> list[int]:
        return [int(r["episode_index"]) for r in rows if self.picks(r)]


def parse_episode_choice(text: str | None) -> EpisodeChoice:
    """The choice ``text`` spells (see the module docstring)."""
    if text is None or text.strip().lower() == "all":
        return EpisodeChoice()
    if text.strip().lower() == "none":
        return EpisodeChoice(everything=False)
    ranges, statuses = [], set()
    for part in (p.strip().lower() for p in text.split(",")):
        if not part:
            continue
        if part in STATUS_WORDS:
            statuses.add(part)
            continue
        m = _RANGE.fullmatch(part)
        if m is None:
            raise EpisodeChoiceError(
                f"--episodes: {part!r} is not an index, a range A-B, a status "
                f"({', '.join(sorted(STATUS_WORDS))}), 'all' or 'none'")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise EpisodeChoiceError(f"--episodes: range {part!r} ends before it starts")
        ranges.append((lo, hi))
    if not ranges and not statuses:
        raise EpisodeChoiceError(f"--episodes: {text!r} chooses nothing (use 'none')")
    return EpisodeChoice(everything=False, ranges=tuple(ranges), statuses=frozenset(statuses))
