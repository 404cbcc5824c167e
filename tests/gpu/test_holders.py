"""Who holds each GPU's memory (evaltui.gpu.holders, ``evaltui gpus``): real processes
charging fake GPUs, matched to their run (through the run's process tree) and to the
shared nodeset host; without NVML the command says so in one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from gpuscene import HOST_NODESET, RUN_ID, GpuScene, build_scene

from evaltui.cli import main
from evaltui.contract.pidref import PidRef
from evaltui.contract.states import AdmitState
from evaltui.gpu.holders import admits_dir, gpu_holders, live_run_dirs, shared_hosts_dir
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.admission.resources import FakeGpuProbe, NvmlProbe
from evaltui.scheduler.admits.entry import AdmitStore, Entry
from evaltui.scheduler.shared.launcher import hosts_dir


@pytest.fixture
def scene(isolated_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
          ) -> Iterator[GpuScene]:
    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "2x24576")
    built = build_scene(isolated_dirs["outputs"], isolated_dirs["state"])
    try:
        yield built
    finally:
        built.close()


def test_each_process_is_named_by_its_run_or_shared_nodeset(scene: GpuScene,
                                                            isolated_dirs) -> None:
    reading = FakeGpuProbe([24576, 24576]).read()
    holders = gpu_holders(reading.gpus,
                          run_dirs=live_run_dirs(runs_root(isolated_dirs["outputs"])))
    gpu0 = [(h.pid, h.used_mb, h.what) for h in holders[0] or []]
    assert gpu0[:2] == [(scene.worker, 4000, f"run {RUN_ID}"),  # the run's worker (a child)
                        (scene.host.pid, 2000, f"shared {HOST_NODESET} · runs {RUN_ID}")]
    stranger = holders[0][2]  # type: ignore[index]
    assert (stranger.pid, stranger.used_mb, stranger.run_id) == (scene.stranger, 500, None)
    assert stranger.what.startswith("python")  # known to no run: its command, as nvitop
    assert [(h.pid, h.used_mb, h.run_id) for h in holders[1] or []] == \
        [(scene.run.pid, 1000, RUN_ID)]
    assert all(h.user for h in holders[0] or [])


def test_a_finished_run_owns_nothing(scene: GpuScene, isolated_dirs) -> None:
    (scene.run_dir / "_DONE").touch()
    assert live_run_dirs(runs_root(isolated_dirs["outputs"])) == []


def test_evaltui_gpus_prints_them_at_80_columns(scene: GpuScene, capsys) -> None:
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in out), out
    text = "\n".join(out)
    assert f"{scene.worker}" in text and f"run {RUN_ID}" in text
    assert f"shared {HOST_NODESET}" in text and "4,000" in text
    assert out[0].startswith("GPU0") and any(line.startswith("GPU1") for line in out)


def test_evaltui_gpus_json(scene: GpuScene, capsys) -> None:
    assert main(["gpus", "--format", "json"]) == 0
    gpus = json.loads(capsys.readouterr().out)
    assert [g["gpu"] for g in gpus] == [0, 1]
    first = gpus[0]["processes"][0]
    assert (first["pid"], first["used_mb"], first["run_id"]) == (scene.worker, 4000, RUN_ID)


def test_evaltui_gpus_without_nvml_is_one_line(isolated_dirs, capsys) -> None:
    probe = NvmlProbe()
    try:
        if probe.read().available:
            pytest.skip("NVML sees a GPU here")
    finally:
        probe.close()
    assert main(["gpus"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "NVML" in captured.err


def test_the_hosts_dir_is_the_schedulers() -> None:
    assert shared_hosts_dir() == hosts_dir()


def test_the_holder_of_an_admitted_serve_entry_is_named_by_it(scene: GpuScene,
                                                              isolated_dirs) -> None:
    """An ``evaltui serve-policy`` holds its own admit entry: its process (here the
    stranger, charging GPU0) is that entry's, in ``evaltui gpus`` and the TUI's panel."""
    entry = Entry("serve-policy", "evaltui serve-policy model:policy", 0, False, 500,
                  PidRef.of(scene.stranger), 1, 0.0, kind="serve",
                  state=AdmitState.ADMITTED, gpu=0)
    AdmitStore().save(entry, "owner", str(isolated_dirs["outputs"]))
    reading = FakeGpuProbe([24576, 24576]).read()
    holders = gpu_holders(reading.gpus,
                          run_dirs=live_run_dirs(runs_root(isolated_dirs["outputs"])))
    [held] = [h for h in holders[0] or [] if h.pid == scene.stranger]
    assert held.what == f"serve admit:{entry.admit_id}" and held.run_id is None
    assert held.to_json()["admit_kind"] == "serve"
    # Waiting, it holds nothing yet: its process is no one's.
    entry.state = AdmitState.WAITING
    AdmitStore().save(entry, "owner", str(isolated_dirs["outputs"]))
    holders = gpu_holders(reading.gpus,
                          run_dirs=live_run_dirs(runs_root(isolated_dirs["outputs"])))
    [held] = [h for h in holders[0] or [] if h.pid == scene.stranger]
    assert held.admit is None and held.what.startswith("python")


def test_the_admits_dir_is_the_schedulers() -> None:
    assert admits_dir() == AdmitStore().dir
