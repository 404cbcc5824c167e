"""DealQueue: the episode indices a pool has left to deal, and each one's attempts."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Mapping


class DealQueue:
    """Indices in dealing order; ``attempts[i]`` counts the attempts dealt at ``i``
    (carried over from earlier runs on resume), ``retries[i]`` the re-deals after an
    ``error``."""

    def __init__(self, indices: Iterable[int],
                 attempts_before: Mapping[int, int] | None = None) -> None:
        self._queue = deque(indices)
        self.attempts: Counter[int] = Counter(attempts_before or {})
        self.retries: Counter[int] = Counter()

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

    def retry(self, index: int, limit: int) -> bool:
        """Queue ``index`` first again if it has had fewer than ``limit`` retries."""
        if self.retries[index] >= limit:
            return False
        self.retries[index] += 1
        self._queue.appendleft(index)
        return True
