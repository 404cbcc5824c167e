"""The pool deals while results are recorded: a slow on_result holds up no worker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pool_helpers import walk_graph, walk_spec
from runhelpers import ENGINE_TESTS

from evaltui.engine.pool import EnvWorkerPool, EpisodeResult
from evaltui.engine.specchecks import check_spec
from evaltui.engine.worker import WorkerConfig
from evaltui.rundir import episode_dir
from evaltui.spec import parse_spec


@pytest.fixture(autouse=True)
def importable_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ENGINE_TESTS))


def test_a_slow_recording_holds_up_no_dealing(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    spec = walk_spec(tmp_path, [1] * 8, walk_graph({"trace_dir": str(trace)}), worker_count=2)
    checked = check_spec(parse_spec(spec))
    run_dir = tmp_path / "run"
    recorded: list[tuple[int, int]] = []

    def on_result(result: EpisodeResult) -> None:
        if not recorded:
            time.sleep(1.5)  # the first episode.json takes ages (a busy disk)
        recorded.append((result.index, time.monotonic_ns()))

    with EnvWorkerPool(lambda slot: WorkerConfig(run_dir, slot, checked, {}), 2,
                       episode_log=lambda i: episode_dir(run_dir, i) / "log.jsonl") as pool:
        pool.run(range(8), on_result)
    assert sorted(i for i, _ in recorded) == list(range(8))
    started = sorted(int(p.name.split(".")[3]) for p in trace.glob("start.*"))
    assert len(started) == 8
    # Every episode was dealt and started while the first result was still being written.
    assert started[-1] < recorded[0][1]
    assert all(episode_dir(run_dir, i).is_dir() for i in range(8))
