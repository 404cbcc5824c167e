"""BatchedInferenceServer: coalescing, scatter, fault isolation, timeouts, statistics."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from faulty_nodesets import BatchedStepPolicy

from evaltui.engine.hosting.batching import BatchedInferenceServer
from evaltui.engine.hosting.stacking import BatchOfOne, stack, unstack


@pytest.fixture()
def make_server() -> Iterator[Callable[..., BatchedInferenceServer]]:
    servers: list[BatchedInferenceServer] = []

    def make(nodeset: Any, **options: Any) -> BatchedInferenceServer:
        servers.append(BatchedInferenceServer(nodeset, **options).start())
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def concurrently(n: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` in n threads released together; results (or exceptions) by i."""
    results: list[Any] = [None] * n
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return results


def test_stack_and_unstack_round_trip() -> None:
    values = [{"image": np.full((2, 2), i, np.uint8), "mission": "m" * (i + 1), "d": i}
              for i in range(3)]
    batch = stack(values)
    assert batch["image"].shape == (3, 2, 2) and list(batch["mission"]) == ["m", "mm", "mmm"]
    back = unstack(batch, 3)
    for orig, got in zip(values, back, strict=True):
        assert np.array_equal(orig["image"], got["image"]) and got["mission"] == orig["mission"]
        assert got["d"] == orig["d"]
    with pytest.raises(ValueError, match="leading axis with 4"):
        unstack(np.zeros(3), 4)


def test_concurrent_calls_coalesce_and_equal_unbatched_results(make_server) -> None:
    model = BatchedStepPolicy()
    server = make_server(model, max_batch_size=8, max_wait_ms=50, callers=lambda: 8)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((4, 3)) for _ in range(8 * 20)]

    def caller(i: int) -> list[Any]:
        return [server.call("double", {"x": inputs[i * 20 + k], "tag": (i, k)})
                for k in range(20)]

    results = concurrently(8, caller)
    alone = BatchOfOne(BatchedStepPolicy())
    for i, outs in enumerate(results):
        for k, out in enumerate(outs):
            expected = alone.call("double", {"x": inputs[i * 20 + k], "tag": (i, k)})
            assert np.array_equal(out["y"], expected["y"]) and out["tag"] == (i, k)
    stats = server.stats()
    assert stats["requests"] == 160 and stats["errors"] == 0
    assert stats["mean_batch_size"] > 2 and stats["max_batch_size_seen"] <= 8
    assert sum(size * n for size, n in stats["batch_size_histogram"].items()) == 160
    assert max(model.batch_sizes) > 1


def test_a_malformed_request_fails_alone(make_server) -> None:
    server = make_server(BatchedStepPolicy(), max_batch_size=16, max_wait_ms=200,
                         callers=lambda: 8)
    good = np.ones((2, 3))
    bad = {3: np.ones((5, 5)),            # does not stack with the others: own batch
           5: np.full((2, 3), np.nan),    # stacks, but makes the batched call raise
           6: "not an array"}             # own batch, fails inside the node

    def caller(i: int) -> Any:
        return server.call("double", {"x": bad.get(i, good), "tag": i})

    results = concurrently(8, caller)
    for i, result in enumerate(results):
        if i == 5:
            assert isinstance(result, ValueError) and "NaN" in str(result)
        elif i == 6:
            assert isinstance(result, Exception)
        else:
            assert not isinstance(result, Exception), result
            expected = good * 2 if i != 3 else bad[3] * 2
            assert np.array_equal(result["y"], expected) and result["tag"] == i
    stats = server.stats()
    assert stats["errors"] == 2 and stats["split_retries"] >= 1


def test_max_wait_bounds_the_wait_of_a_lone_caller(make_server) -> None:
    server = make_server(BatchedStepPolicy(), max_batch_size=64, max_wait_ms=30)
    t0 = time.perf_counter()
    server.call("double", {"x": np.ones(2), "tag": 0})
    waited = time.perf_counter() - t0
    assert 0.02 < waited < 5
    # Knowing every caller is already queued, the server does not wait at all.
    quick = make_server(BatchedStepPolicy(), max_batch_size=64, max_wait_ms=5000,
                        callers=lambda: 1)
    t0 = time.perf_counter()
    quick.call("double", {"x": np.ones(2), "tag": 0})
    assert time.perf_counter() - t0 < 2


def test_per_request_timeout(make_server) -> None:
    server = make_server(BatchedStepPolicy(call_sleep_ms=400), max_batch_size=1,
                         max_wait_ms=0)
    first = threading.Thread(target=server.call, args=("double", {"x": np.ones(1), "tag": 0}))
    first.start()
    time.sleep(0.1)  # the first call now occupies the server
    with pytest.raises(TimeoutError, match="queue"):
        server.call("double", {"x": np.ones(1), "tag": 1}, timeout=0.05)
    first.join()
    deadline = time.monotonic() + 5
    while server.stats()["timeouts"] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)  # the expired request fails when the server reaches it
    assert server.stats()["timeouts"] == 1
    # The server is still healthy afterwards.
    assert server.call("double", {"x": np.ones(1), "tag": 2}, timeout=5)["tag"] == 2


def test_unbatched_ops_and_methods_share_the_server_thread(make_server) -> None:
    server = make_server(BatchedStepPolicy())
    assert server.call("echo", {"x": 4}) == {"y": 4}
    with pytest.raises(KeyError):
        server.call("fail", {"x": 1})
    done = threading.Event()
    out: list[Any] = []
    server.submit("close", (), lambda ok, v: (out.append((ok, v)), done.set()), is_method=True)
    assert done.wait(5) and out[0][0] is False and "not a remotely callable" in str(out[0][1])


def test_batching_off_serves_one_at_a_time(make_server) -> None:
    model = BatchedStepPolicy()
    server = make_server(model, batching=False)
    results = concurrently(6, lambda i: server.call("double", {"x": np.ones(2) * i, "tag": i}))
    assert [r["tag"] for r in results] == list(range(6))
    assert set(model.batch_sizes) == {1}
    assert server.stats()["mean_batch_size"] == 1.0


def test_close_fails_what_is_still_queued(make_server) -> None:
    server = make_server(BatchedStepPolicy(call_sleep_ms=300), max_batch_size=1)
    threading.Thread(target=server.call, args=("double", {"x": np.ones(1), "tag": 0}),
                     daemon=True).start()
    time.sleep(0.05)
    got: list[Any] = []
    server.submit("double", {"x": np.ones(1), "tag": 1}, lambda ok, v: got.append((ok, v)))
    server.close()
    assert got and got[0][0] is False
    with pytest.raises(RuntimeError, match="closed"):
        server.call("echo", {"x": 1})
