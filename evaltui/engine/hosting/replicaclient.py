"""ReplicatedNodeset: one shared nodeset hosted N times (one host per GPU), seen as one.

A worker's client of a replicated nodeset holds a :class:`~evaltui.engine.hosting.proxy.
RemoteNodeset` per replica URL and sends each request to one of them, chosen by a
:class:`ReplicaSpread`:

- ``slot`` (:class:`SlotSpread`): worker slot ``i`` uses replica ``i % R``, so each
  replica batches the calls of a fixed K/R workers;
- ``least_loaded`` (:class:`LeastLoadedSpread`): per request, the replica with the fewest
  requests in flight across all of the run's workers, read from the run's *load board*:
  a small shared file (one byte per worker slot: 0 idle, ``r + 1`` calling replica r)
  that each worker writes only its own byte of, so no lock is needed. A worker that
  cannot open the board (a Slurm step on another node) falls back to ``slot``.

Which one is the default is measured (docs/performance.md, "Replicas"); the runner picks
it (:data:`evaltui.engine.run.replicas.DEFAULT_SPREAD`). ``least_loaded`` sends an
episode's requests to different replicas, so it suits stateless models only.

A replica that refuses connections (its host died and was not restarted: lost) is left
for the others at once; a request in flight when its host died raises
:class:`~evaltui.engine.hosting.proxy.HostGoneError` as with one host, and the episode
is retried by the dealing core. Only when every replica refuses does the client wait
(up to ``connect_timeout``) for one to come back, as a single host's client does.
"""

from __future__ import annotations

import mmap
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from evaltui.engine.hosting.channel import ChannelError, SharedEndpoint
from evaltui.engine.hosting.proxy import HostGoneError, RemoteNodeset

QUICK_DIAL_SEC = 0.2
"""How long one replica's dial may retry before the client tries another one."""
SPREADS = ("slot", "least_loaded")


class ReplicaSpread:
    """Which replica a worker's next request goes to; ``live`` is never empty."""

    def pick(self, live: list[int]) -> int:
        raise NotImplementedError

    @contextmanager
    def calling(self, replica: int) -> Iterator[None]:
        """Bounds one request to ``replica`` (the load board counts it)."""
        yield

    def close(self) -> None:
        """Release what the spread holds (the board's map)."""


class SlotSpread(ReplicaSpread):
    """Slot ``i`` sticks to live replica ``i % R``: all replicas up, replica ``i % R``; once
    some are lost, the slots deal themselves over the rest again, evenly."""

    def __init__(self, slot: int, count: int) -> None:
        self.slot = slot
        self.count = count

    def pick(self, live: list[int]) -> int:
        return live[self.slot % len(live)]


class LeastLoadedSpread(ReplicaSpread):
    """The live replica with the fewest requests in flight on the board; ties go to the
    one nearest this slot's own (so idle replicas fill evenly)."""

    def __init__(self, slot: int, count: int, board: mmap.mmap) -> None:
        self.slot = slot
        self.count = count
        self.board = board

    def pick(self, live: list[int]) -> int:
        cells = self.board[:]
        home = self.slot % self.count
        return min(live, key=lambda r: (cells.count(r + 1), (r - home) % self.count))

    @contextmanager
    def calling(self, replica: int) -> Iterator[None]:
        self.board[self.slot] = replica + 1
        try:
            yield
        finally:
            self.board[self.slot] = 0

    def close(self) -> None:
        self.board.close()


def make_spread(endpoint: SharedEndpoint, slot: int) -> ReplicaSpread:
    """The endpoint's spread for this worker slot (``slot`` when the board is out of reach)."""
    count = len(endpoint.urls)
    if endpoint.spread == "least_loaded" and endpoint.board:
        try:
            with open(endpoint.board, "r+b") as fh:
                board = mmap.mmap(fh.fileno(), 0)
        except (OSError, ValueError):
            return SlotSpread(slot, count)
        if slot < len(board):
            return LeastLoadedSpread(slot, count, board)
        board.close()
    return SlotSpread(slot, count)


class ReplicaCalls:
    """A worker's client of every replica of one nodeset, for both placements (local
    hosts, Ray actors): each call goes to the live replica ``spread`` picks. One that
    refuses a connection (``refusing``: lost) is left for the others at once; only when
    every one refuses does the call wait (up to ``connect_timeout``) for one to come back.
    One that dies under a call (``dying``) is left out and the call raises: the dealing
    core retries the episode."""

    def __init__(self, targets: list[Any], spread: ReplicaSpread, *,
                 dying: tuple[type[Exception], ...],
                 refusing: tuple[type[Exception], ...] = (),
                 connect_timeout: float = 30.0) -> None:
        self.targets, self.spread, self.connect_timeout = targets, spread, connect_timeout
        self.dying, self.refusing = dying, refusing
        self.refused: set[int] = set()
        """Replicas that refused a connection or died (lost), left until every one has."""
        self.served = [0] * len(targets)
        """Requests answered by each replica, as this client saw them."""

    def call(self, op: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return self._send(lambda r: r.call(op, inputs))  # type: ignore[no-any-return]

    def set_episode(self, episode: Mapping[str, Any]) -> dict[str, Any]:
        return self._send(lambda r: r.set_episode(episode))  # type: ignore[no-any-return]

    def begin_episode(self, episode: Mapping[str, Any]) -> None:
        self._send(lambda r: r.begin_episode(episode))

    def trajectory(self) -> Any:
        return self._send(lambda r: r.trajectory())

    def _send(self, request: Callable[[Any], Any]) -> Any:
        deadline = time.monotonic() + self.connect_timeout
        delay = 0.02
        while True:
            live = [r for r in range(len(self.targets)) if r not in self.refused]
            replica = self.spread.pick(live)
            try:
                with self.spread.calling(replica):
                    answer = request(self.targets[replica])
            except self.refusing:
                self.refused.add(replica)
                if len(self.refused) < len(self.targets):
                    continue  # another replica takes it at once
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)  # every replica refused: wait for one to come back
                delay = min(delay * 2, 0.5)
                self.refused.clear()
                continue
            except self.dying:
                self.refused.add(replica)  # died under this request: the episode is retried
                if len(self.refused) == len(self.targets):
                    self.refused.clear()
                raise
            self.served[replica] += 1
            return answer


class ReplicatedNodeset(ReplicaCalls):
    """A client of every replica of one nodeset, with RemoteNodeset's interface."""

    def __init__(self, endpoint: SharedEndpoint, slot: int, *, timeout: float | None = None,
                 connect_timeout: float = 30.0) -> None:
        if len(endpoint.urls) < 1:
            raise ValueError("a replicated endpoint needs at least one URL")
        self.url = endpoint.url
        self.urls = endpoint.urls
        proxies = [RemoteNodeset(u, endpoint.secret, timeout=timeout,
                                 connect_timeout=QUICK_DIAL_SEC) for u in endpoint.urls]
        super().__init__(proxies, make_spread(endpoint, slot), dying=(HostGoneError,),
                         refusing=(ChannelError,), connect_timeout=connect_timeout)

    success_distance = RemoteNodeset.success_distance  # the same rule, over ``describe``

    def describe(self) -> dict[str, Any]:
        return self._send(lambda p: p.describe())  # type: ignore[no-any-return]

    def stats(self) -> dict[str, Any]:
        return self._send(lambda p: p.stats())  # type: ignore[no-any-return]

    def ping(self) -> None:
        self._send(lambda p: p.ping())

    def connect(self) -> ReplicatedNodeset:
        """Connect to the replica this slot starts on (raises if none answers)."""
        self.ping()
        return self

    def close(self) -> None:
        for proxy in self.targets:
            proxy.close()
        self.spread.close()
