"""BatchedInferenceServer: one thread owns a shared nodeset and coalesces calls (DESIGN §5).

K callers of a shared model should cost one stacked forward pass, not K. Requests from
any thread queue here and one thread runs them in order: either the server's own thread
(``start``, for in-process callers), or a host's connection loop, which drives it with
``due_in``/``run_due`` between reads so that no request crosses threads. A call to a
batched node gathers every queued call of the same node, and waits for more until
``max_batch_size`` is reached, ``max_wait_ms`` has passed since the first arrived, or
every known caller already has a request queued (``callers``: nothing more can arrive,
so waiting is pointless), whichever comes first.
The batch is stacked, the node is called once, and the outputs are scattered back.

A request that does not stack with the others (another shape, a missing key) goes in
its own batch; if a stacked call raises, its requests are retried one by one, so one
malformed request fails only its own caller. Requests carry a timeout: one still queued
at its deadline fails with TimeoutError. Non-batched ops and other methods
(``set_episode``, ``trajectory``) run on the same thread, one at a time, so the nodeset
is never entered concurrently.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from contextlib import suppress
from typing import Any

from evaltui.engine.hosting.stacking import call_stacked, request_signature
from evaltui.engine.nodes import NodeSet

Reply = Callable[[bool, Any], None]
"""Called once per request: ``(True, outputs)`` or ``(False, exception)``."""

METHODS = frozenset({"set_episode", "begin_episode", "trajectory"})


HOST_MAX_BATCH_SIZE = 64
HOST_MAX_WAIT_MS = 2.0
"""The batching of a run's own hosts of its shared nodesets (local processes or Ray
actors)."""


class _Request:
    __slots__ = ("op", "inputs", "reply", "is_method", "submitted", "deadline")

    def __init__(self, op: str, inputs: Any, reply: Reply, is_method: bool,
                 timeout: float | None) -> None:
        self.op, self.inputs, self.reply, self.is_method = op, inputs, reply, is_method
        self.submitted = time.monotonic()
        self.deadline = None if timeout is None else self.submitted + timeout


class BatchedInferenceServer:
    """Serves one nodeset instance; ``start``/``close`` bound its thread."""

    def __init__(self, nodeset: NodeSet, *, max_batch_size: int = 32, max_wait_ms: float = 2.0,
                 callers: Callable[[], int] | None = None, batching: bool = True) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.nodeset = nodeset
        self.max_batch_size = max_batch_size
        self.max_wait_sec = max_wait_ms / 1000.0
        self.callers = callers
        self.specs = dict(type(nodeset).node_specs())
        # batching=False serves batched nodes one request at a time (the baseline).
        self.batched = {op for op, s in self.specs.items() if s.batched and batching}
        self._pending: deque[_Request] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._sizes: Counter[int] = Counter()
        self._counts: Counter[str] = Counter()
        self._latency_sum = 0.0
        self._thread = threading.Thread(target=self._serve, name="batched-inference",
                                        daemon=True)

    # ---- callers' side ---------------------------------------------------------------------
    def start(self) -> BatchedInferenceServer:
        self._thread.start()
        return self

    def submit(self, op: str, inputs: Mapping[str, Any] | tuple[Any, ...], reply: Reply, *,
               timeout: float | None = None, is_method: bool = False) -> None:
        """Queue a node call (inputs by port) or, with ``is_method``, a METHODS call (args).

        ``reply`` gets the result, on the thread that runs the request.
        """
        request = _Request(op, inputs, reply, is_method, timeout)
        with self._cond:
            closed = self._closed
            if not closed:
                self._pending.append(request)
                self._cond.notify()
        if closed:
            reply(False, RuntimeError("the inference server is closed"))

    def call(self, op: str, inputs: Mapping[str, Any] | tuple[Any, ...],
             timeout: float | None = None, *, is_method: bool = False) -> Any:
        """Blocking :meth:`submit` for in-process callers; raises the node's (or method's)
        exception or TimeoutError."""
        future: Future[Any] = Future()

        def reply(ok: bool, value: Any) -> None:
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

        self.submit(op, inputs, reply, timeout=timeout, is_method=is_method)
        try:
            return future.result(timeout=timeout)
        except TimeoutError:
            if future.done():
                raise  # the node itself raised a TimeoutError
            # Still queued (it fails there at its turn) or running: the caller stops waiting.
            raise TimeoutError(f"request to {op!r} got no result within its timeout of "
                               f"{timeout} s (queued behind other requests)") from None

    def stats(self) -> dict[str, Any]:
        """Batch-size statistics: histogram, means, errors and timeouts so far."""
        with self._cond:
            sizes = dict(sorted(self._sizes.items()))
            counts = dict(self._counts)
            latency_sum = self._latency_sum
        batches = sum(sizes.values())
        batched_requests = sum(size * n for size, n in sizes.items())
        return {
            "batches": batches,
            "batched_requests": batched_requests,
            "mean_batch_size": round(batched_requests / batches, 3) if batches else 0.0,
            "max_batch_size_seen": max(sizes, default=0),
            "batch_size_histogram": sizes,
            "requests": counts.get("requests", 0),
            "errors": counts.get("errors", 0),
            "timeouts": counts.get("timeouts", 0),
            "split_retries": counts.get("split_retries", 0),
            "mean_latency_ms": round(latency_sum / max(counts.get("requests", 0), 1) * 1e3, 3),
        }

    def close(self) -> None:
        """Stop the thread; requests still queued fail."""
        with self._cond:
            self._closed = True
            left = list(self._pending)
            self._pending.clear()
            self._cond.notify_all()
        for request in left:
            request.reply(False, RuntimeError("the inference server is closed"))
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    # ---- driving -----------------------------------------------------------------------------
    def due_in(self) -> float | None:
        """Seconds until the queue's head must run (<= 0: now); None if the queue is empty."""
        with self._cond:
            return self._due_in_locked(time.monotonic())

    def run_due(self) -> None:
        """Run, on the calling thread, everything that is due now."""
        while True:
            with self._cond:
                now = time.monotonic()
                due = self._due_in_locked(now)
                if due is None or due > 0:
                    return
                batch = self._take_locked()
            self._execute(batch)

    def _serve(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    due = self._due_in_locked(time.monotonic())
                    if due is not None and due <= 0:
                        break
                    self._cond.wait(due)  # a submit wakes us to look again
                if self._closed:
                    return
                batch = self._take_locked()
            self._execute(batch)

    def _due_in_locked(self, now: float) -> float | None:
        if not self._pending:
            return None
        head = self._pending[0]
        if head.is_method or head.op not in self.batched:
            return 0.0
        # Each caller has at most one request in flight: if all of them are queued
        # already, no more can come while we wait.
        if self.callers is not None and len(self._pending) >= self.callers():
            return 0.0
        if len(self._pending) >= self.max_batch_size and sum(
                1 for r in self._pending
                if r.op == head.op and not r.is_method) >= self.max_batch_size:
            return 0.0
        return head.submitted + self.max_wait_sec - now

    def _take_locked(self) -> list[_Request]:
        """The head request, with every queued call of the same batched op (up to the max)."""
        head = self._pending.popleft()
        if head.is_method or head.op not in self.batched:
            return [head]
        batch: list[_Request] = [head]
        keep: deque[_Request] = deque()
        for request in self._pending:
            if (request.op == head.op and not request.is_method
                    and len(batch) < self.max_batch_size):
                batch.append(request)
            else:
                keep.append(request)
        self._pending = keep
        return batch

    def _execute(self, batch: list[_Request]) -> None:
        if len(batch) == 1 and (batch[0].is_method or batch[0].op not in self.batched):
            if self._live(batch[0]):
                self._run_one(batch[0])
        else:
            self._run_batch(batch)

    def _run_batch(self, batch: list[_Request]) -> None:
        now = time.monotonic()
        live = [r for r in batch if self._live(r, now)]
        spec = self.specs[batch[0].op]
        groups: dict[Any, list[_Request]] = {}
        for request in live:
            try:
                key = request_signature(spec, request.inputs)
            except Exception as exc:  # an input numpy cannot even look at
                self._finish(request, False, exc)
                continue
            groups.setdefault(key, []).append(request)
        for group in groups.values():
            try:
                results = call_stacked(self.nodeset, spec, [r.inputs for r in group])
            except Exception as exc:
                if len(group) == 1:
                    self._record_size(1)
                    self._finish(group[0], False, exc)
                    continue
                # Find the culprit(s): each request alone, so the others still succeed.
                self._count("split_retries")
                for request in group:
                    self._run_stacked_alone(spec, request)
                continue
            self._finish_batch(group, results)

    def _run_stacked_alone(self, spec: Any, request: _Request) -> None:
        self._record_size(1)
        try:
            result = call_stacked(self.nodeset, spec, [request.inputs])[0]
        except Exception as exc:
            self._finish(request, False, exc)
        else:
            self._finish(request, True, result)

    def _run_one(self, request: _Request) -> None:
        try:
            if request.is_method:
                if request.op not in METHODS:
                    raise AttributeError(f"{request.op!r} is not a remotely callable method")
                result = getattr(self.nodeset, request.op)(*request.inputs)
            else:
                spec = self.specs.get(request.op)
                if spec is None:
                    raise AttributeError(f"{type(self.nodeset).__name__} has no node op "
                                         f"{request.op!r}")
                if spec.batched:  # batching switched off: still a batch, of one
                    self._record_size(1)
                    result = call_stacked(self.nodeset, spec, [request.inputs])[0]
                else:
                    result = self.nodeset.call(request.op, request.inputs)
        except Exception as exc:
            self._finish(request, False, exc)
        else:
            self._finish(request, True, result)

    def _live(self, request: _Request, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        if request.deadline is not None and now > request.deadline:
            self._count("timeouts")
            waited = now - request.submitted
            self._finish(request, False, TimeoutError(
                f"request to {request.op!r} waited {waited:.3f} s in the queue, over its "
                f"timeout of {request.deadline - request.submitted:.3f} s"))
            return False
        return True

    def _finish_batch(self, batch: list[_Request], results: list[Any]) -> None:
        """Answer a batch that ran: one statistics update for all of it."""
        now = time.monotonic()
        with self._cond:
            self._sizes[len(batch)] += 1
            self._counts["requests"] += len(batch)
            self._latency_sum += sum(now - r.submitted for r in batch)
        for request, result in zip(batch, results, strict=True):
            with suppress(Exception):  # a caller that went away must not stop the server thread
                request.reply(True, result)

    def _finish(self, request: _Request, ok: bool, value: Any) -> None:
        with self._cond:
            self._counts["requests"] += 1
            self._counts["errors"] += not ok
            self._latency_sum += time.monotonic() - request.submitted
        with suppress(Exception):  # a caller that went away must not stop the server thread
            request.reply(ok, value)

    def _record_size(self, size: int) -> None:
        with self._cond:
            self._sizes[size] += 1

    def _count(self, name: str) -> None:
        with self._cond:
            self._counts[name] += 1
