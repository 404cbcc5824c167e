"""Where a run's replicas go (its GPUs, from its environment) and which replica a
worker's request goes to (the spread), without subprocesses."""

from __future__ import annotations

import mmap
import time
from pathlib import Path

import pytest
from faulty_nodesets import BatchedStepPolicy

from evaltui.engine.hosting.channel import SharedEndpoint, new_secret
from evaltui.engine.hosting.host import NodesetServer
from evaltui.engine.hosting.replicaclient import (
    LeastLoadedSpread,
    ReplicatedNodeset,
    SlotSpread,
    make_spread,
)
from evaltui.engine.run.gpus import RunGpu, run_gpus


def labels(gpus: list[RunGpu]) -> list[str]:
    return [g.label for g in gpus]


def test_the_run_takes_the_gpus_its_environment_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "4x24576")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("EVALTUI_FAKE_GPU_INDEX", raising=False)
    assert labels(run_gpus()) == ["GPU0", "GPU1", "GPU2", "GPU3"]  # no scheduler: all
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")  # the scheduler's order is kept
    assert labels(run_gpus()) == ["GPU3", "GPU1"]
    monkeypatch.setenv("EVALTUI_FAKE_GPU_INDEX", "2")  # the fake index wins
    gpus = run_gpus()
    assert labels(gpus) == ["GPU2"]
    assert gpus[0].env() == {"CUDA_VISIBLE_DEVICES": "2", "EVALTUI_FAKE_GPU_INDEX": "2"}
    monkeypatch.delenv("EVALTUI_FAKE_GPUS")
    monkeypatch.delenv("EVALTUI_FAKE_GPU_INDEX")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5f2a,GPU-77b0")
    assert [g.env() for g in run_gpus()] == [{"CUDA_VISIBLE_DEVICES": "GPU-5f2a"},
                                             {"CUDA_VISIBLE_DEVICES": "GPU-77b0"}]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,-1,1")  # CUDA stops at -1
    assert labels(run_gpus()) == ["GPU0"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert run_gpus() == []


def test_a_replica_host_on_a_real_gpu_counts_gpus_as_nvml_does() -> None:
    """CUDA numbers GPUs fastest first unless told PCI order; NVML (the scheduler's
    measure) numbers them in PCI order: without CUDA_DEVICE_ORDER a host of GPU1 on a
    mixed box could open another card than the one measured."""
    assert RunGpu("1").env() == {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert RunGpu("2", fake=True).env() == {"CUDA_VISIBLE_DEVICES": "2",
                                            "EVALTUI_FAKE_GPU_INDEX": "2"}


def test_slot_spread_binds_slots_and_redeals_them_when_a_replica_is_lost() -> None:
    assert [SlotSpread(i, 4).pick([0, 1, 2, 3]) for i in range(8)] == [0, 1, 2, 3] * 2
    # Replica 1 lost: the six slots spread over the three left, two each.
    picks = [SlotSpread(i, 4).pick([0, 2, 3]) for i in range(6)]
    assert sorted(picks) == [0, 0, 2, 2, 3, 3]


def test_least_loaded_spread_reads_every_worker_s_calls_off_the_board(tmp_path: Path) -> None:
    path = tmp_path / "policy.load"
    path.write_bytes(bytes(6))
    with open(path, "r+b") as fh:
        board = mmap.mmap(fh.fileno(), 0)
    spreads = [LeastLoadedSpread(i, 3, board) for i in range(6)]
    with spreads[0].calling(0), spreads[1].calling(0), spreads[2].calling(2):
        assert board[:3] == bytes([1, 1, 3])
        assert spreads[3].pick([0, 1, 2]) == 1  # nobody on replica 1
        assert spreads[3].pick([0, 2]) == 2  # 1 lost: the less busy of the others
    assert board[:] == bytes(6)  # each call cleared its own cell
    board.close()


def test_a_worker_that_cannot_open_the_board_spreads_by_slot(tmp_path: Path) -> None:
    endpoint = SharedEndpoint("evaltui+unix:///x/a.sock", b"s", urls=("a", "b"),
                              spread="least_loaded", board=str(tmp_path / "missing.load"))
    assert isinstance(make_spread(endpoint, 1), SlotSpread)


def test_requests_move_off_a_replica_that_refuses_at_once(sockets: Path) -> None:
    secret = new_secret()
    a = NodesetServer(BatchedStepPolicy(), f"evaltui+unix://{sockets}/a.sock", secret)
    b = NodesetServer(BatchedStepPolicy(), f"evaltui+unix://{sockets}/b.sock", secret)
    with a, b:
        endpoint = SharedEndpoint(a.url, secret, urls=(a.url, b.url))
        first, second = (ReplicatedNodeset(endpoint, slot) for slot in (0, 1))
        try:
            for client in (first, second):
                assert client.call("echo", {"x": 1}) == {"y": 1}
            assert (first.served, second.served) == ([1, 0], [0, 1])  # bound by slot
            b.close()  # replica 1 is gone for good (a lost replica is never restarted)
            t0 = time.monotonic()
            # Sent before the host could read it: safe to send again, to replica 0.
            assert second.call("echo", {"x": 2}) == {"y": 2}
            assert second.call("echo", {"x": 3}) == {"y": 3}
            assert time.monotonic() - t0 < second.connect_timeout / 3  # no waiting on 1
            assert second.served == [2, 1] and second.refused == {1}
        finally:
            first.close()
            second.close()


def test_a_multi_gpu_run_s_own_processes_charge_its_first_fake_gpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from evaltui.gpu import fakegpu

    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "4x1000")
    monkeypatch.setenv("EVALTUI_FAKE_GPU_INDEX", "2,3")  # as the scheduler starts the run
    try:
        assert fakegpu.charge(100) == 100  # was: ValueError on int("2,3")
        assert fakegpu.charged(2) == 100 and fakegpu.charged(3) == 0
    finally:
        fakegpu.release(gpu=2)
