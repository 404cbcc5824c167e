"""Three clients submitting at once: every run accepted exactly once, run_ids unique."""

from __future__ import annotations

import threading

from apihelpers import Backend, bot_spec

from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root

CLIENTS = 3
PER_CLIENT = 15


def test_three_clients_submit_concurrently(make_backend) -> None:
    # Held by a lock check, so the test measures submission, not 45 BabyAI runs.
    backend: Backend = make_backend(lock_check=lambda: "hold (test)")
    results: list[list[str]] = [[] for _ in range(CLIENTS)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(CLIENTS)

    def submit(slot: int) -> None:
        client = backend.client()
        try:
            barrier.wait()
            for i in range(PER_CLIENT):
                spec = bot_spec(1, priority=slot)
                spec["eval"]["graph_name"] = f"client{slot}-job{i}"
                results[slot].append(client.submit(spec).run_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=submit, args=(slot,)) for slot in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    run_ids = [r for rs in results for r in rs]
    assert len(run_ids) == CLIENTS * PER_CLIENT == len(set(run_ids))
    # Each run dir holds the spec of exactly the submission that got its id.
    root = runs_root(backend.scheduler.outputs)
    for slot, ids in enumerate(results):
        for i, run_id in enumerate(ids):
            spec = read_json(root / run_id / "spec.json")
            assert spec["eval"]["graph_name"] == f"client{slot}-job{i}"
    assert sorted(p.name for p in root.iterdir()) == sorted(run_ids)
    listed = backend.client().list_runs()
    assert sorted(r.run_id for r in listed) == sorted(run_ids)
    assert {r.state.value for r in listed} == {"queued"}
    assert len(backend.client().queue()) == CLIENTS * PER_CLIENT
