"""DealQueue: the episode indices an executor has left to deal, and each one's attempts."""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Mapping


class DealQueue:
    """Indices in dealing order; ``attempts[i]`` counts the attempts dealt at ``i``
    (carried over from earlier runs on resume), ``retries[reason][i]`` the re-deals after
    an ``error`` (``"error"``; ``"node"``: its worker's machine left)."""

    def __init__(self, indices: Iterable[int],
                 attempts_before: Mapping[int, int] | None = None) -> None:
        self._queue = deque(indices)
        self.attempts: Counter[int] = Counter(attempts_before or {})
        self.retries: defaultdict[str, Counter[int]] = defaultdict(Counter)

    def __len__(self) -> int:
        return len(self._queue)

    def first(self, count: int) -> list[int]:
        """The next ``count`` indices to deal (fewer near the end), still queued."""
        return [self._queue[i] for i in range(min(count, len(self._queue)))]

    def take(self) -> int:
        """Deal the next index: one more attempt at it."""
        index = self._queue.popleft()
        self.attempts[index] += 1
        return index

    def undeal(self, index: int) -> None:
        """A dealt index that never started: first again, its attempt not counted."""
        self._queue.appendleft(index)
        self.attempts[index] -= 1

    def retry(self, index: int, limit: int, reason: str = "error") -> bool:
        """Queue ``index`` first again if it has had fewer than ``limit`` retries for
        ``reason``."""
        if self.retries[reason][index] >= limit:
            return False
        self.retries[reason][index] += 1
        self._queue.appendleft(index)
        return True
