"""The replica manager's shared core (evaltui/engine/hosting/replicabook.py), which both
placements (local hosts, Ray actors) use: how many replicas, whether enough started, and
the run's record of them."""

from __future__ import annotations

import pytest

from evaltui.engine.graph.definition import NodesetDef
from evaltui.engine.hosting.replicabook import (
    BookedReplica,
    ReplicaBook,
    ReplicaGone,
    enough_started,
    replica_count,
)


def nodeset(replicas: int | str, least: int = 1) -> NodesetDef:
    return NodesetDef(impl="x:Y", parallelism="shared", replicas=replicas,
                      min_replicas=least)


def test_the_count_and_the_enough_rule_are_one_for_both_placements() -> None:
    assert replica_count("p", nodeset("per_gpu"), 3, "", RuntimeError) == 3
    assert replica_count("p", nodeset(2), 3, "", RuntimeError) == 2
    assert replica_count("p", nodeset(5), 3, "", RuntimeError) == 3
    assert replica_count("p", nodeset(5, least=2), 0, "", RuntimeError) == 1  # on the host
    with pytest.raises(KeyError, match="needs min_replicas=3 GPUs; the run has 2"):
        replica_count("p", nodeset(4, least=3), 2, "the run has 2", KeyError)
    assert enough_started(nodeset(3, least=2), 2, 3)
    assert not enough_started(nodeset(3, least=2), 1, 3)
    assert not enough_started(nodeset(3, least=0), 0, 3)  # never none


def test_the_book_keeps_the_last_reading_and_marks_a_gone_replica_lost() -> None:
    served = {"a": 5, "b": 7}

    def read(replica: BookedReplica) -> int:
        answer = served[replica.handle]
        if isinstance(answer, Exception):
            raise answer
        return answer

    book = ReplicaBook(read, poll_sec=60.0)
    pids = iter([11, 12])
    book.add("policy", BookedReplica("a", "GPU0", lambda: 1),
             BookedReplica("b", "GPU1", lambda: next(pids)))
    book.stop()  # one reading
    served.update(a=TimeoutError("slow"), b=ReplicaGone("b"))
    book.stop()  # a keeps 5; b is lost, its 7 kept
    assert book.snapshot() == {"policy": [
        {"gpu": "GPU0", "pid": 1, "requests": 5, "state": "up"},
        {"gpu": "GPU1", "pid": 11, "requests": 7, "state": "lost"}]}
    book.lose_all()
    assert [n["state"] for n in book.snapshot()["policy"]] == ["lost", "lost"]  # type: ignore[index]
    assert ReplicaBook(read, 1.0).snapshot() is None
