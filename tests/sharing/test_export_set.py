"""``evaltui export SET_DIR``: every member a tracker run grouped under the set (W&B
group, MLflow parent run, TensorBoard folder), its axes as config, its checkpoint step
as the step of ``checkpoint/<metric>``; the numbers are the members' summary.json.
Offline, as the run exports are tested (test_export_trackers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from wandb_records import read_run

from evaltui.cli import main
from evaltui.rundir.jsonfiles import read_json


def members(real_set: Path) -> list[dict]:
    out = []
    for m in read_json(real_set / "set.json")["members"]:
        out.append({**m, "summary": read_json(Path(m["run_dir"]) / "summary.json")})
    return out


def label(m: dict) -> str:
    """The member's axes in the set's order, the checkpoint file named by its step."""
    return " ".join(f"{k}={v}" for k, v in m["axes"].items() if k != "checkpoint")


def test_tensorboard_a_folder_per_set_a_subfolder_per_member(real_set: Path,
                                                              tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="tensorboard not installed (evaltui[tensorboard])")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = tmp_path / "tb"
    for _ in range(2):  # again: the same folders, their files replaced
        assert main(["export", str(real_set), "--to", "tensorboard", "--logdir",
                     str(logdir)]) == 0
    (set_folder,) = logdir.iterdir()
    assert set_folder.name == "curve"
    found = {p.name for p in set_folder.iterdir()}
    ms = members(real_set)
    assert found == {label(m).replace(" ", "_") for m in ms} | {
        "curve_split=GoToLocal", "curve_split=GoToObjMaze"}
    for m in ms:
        folder = set_folder / label(m).replace(" ", "_")
        assert len(list(folder.iterdir())) == 1
        acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
        acc.Reload()
        (event,) = acc.Scalars("checkpoint/success")
        assert event.step == m["axes"]["step"]
        assert event.value == pytest.approx(m["summary"]["metrics"]["success"], rel=1e-6)
        (summary,) = acc.Scalars("summary/success")
        assert summary.value == pytest.approx(m["summary"]["metrics"]["success"], rel=1e-6)
        assert m["key"] in acc.Tensors("set")[0].tensor_proto.string_val[0].decode()
    acc = EventAccumulator(str(set_folder / "curve_split=GoToLocal"),
                           size_guidance={"scalars": 0})
    acc.Reload()
    curve = [(e.step, e.value) for e in acc.Scalars("success")]
    want = sorted((m["axes"]["step"], m["summary"]["metrics"]["success"]) for m in ms
                  if m["axes"]["split"] == "GoToLocal")
    assert [s for s, _ in curve] == [s for s, _ in want]
    assert [v for _, v in curve] == pytest.approx([v for _, v in want], rel=1e-6)


def test_mlflow_members_are_children_of_the_sets_run(real_set: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow", reason="mlflow not installed (evaltui[mlflow])")
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    for _ in range(2):
        assert main(["export", str(real_set), "--to", "mlflow", "--tracking-uri", uri]) == 0
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("evaltui")
    runs = client.search_runs([exp.experiment_id])
    ms = members(real_set)
    assert len(runs) == len(ms) + 1  # not doubled by the second export
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert parent.info.run_name == "set curve"
    children = {r.data.tags["evaltui.set.member_key"]: r for r in runs if r is not parent}
    for m in ms:
        run = children[m["key"]]
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.params["set.split"] == m["axes"]["split"]
        assert run.data.params["set.step"] == str(m["axes"]["step"])
        assert run.data.metrics["success"] == m["summary"]["metrics"]["success"]
        (point,) = client.get_metric_history(run.info.run_id, "checkpoint/success")
        assert point.step == m["axes"]["step"]
        assert point.value == m["summary"]["metrics"]["success"]
    history = client.get_metric_history(parent.info.run_id, "success/split:GoToLocal")
    assert sorted((p.step, p.value) for p in history) == sorted(
        (m["axes"]["step"], m["summary"]["metrics"]["success"]) for m in ms
        if m["axes"]["split"] == "GoToLocal")


def test_wandb_members_are_one_group_with_their_axes_as_config(
        real_set: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb", reason="wandb not installed (evaltui[wandb])")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for var in ("WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.chdir(tmp_path)
    assert main(["export", str(real_set), "--to", "wandb", "--project", "sets",
                 "--dir", str(tmp_path / "w")]) == 0
    read = [read_run(r) for r in sorted((tmp_path / "w" / "wandb").glob("offline-run-*"))]
    ms = {m["key"]: m for m in members(real_set)}
    assert len(read) == len(ms)
    for got in read:
        m = ms[got["config"]["set"]["member_key"]]
        assert got["group"] == "curve" and "set:curve" in got["tags"]
        assert got["config"]["set"]["axes"] == m["axes"]
        assert got["name"] == f"curve {label(m)}"
        assert got["summary"]["success"] == m["summary"]["metrics"]["success"]
        last = got["history"][-1]
        assert last["checkpoint_step"] == m["axes"]["step"]
        assert last["checkpoint/success"] == m["summary"]["metrics"]["success"]


def test_a_run_name_for_a_set_is_refused_in_one_line(
        real_set: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(real_set), "--to", "tensorboard", "--logdir",
                 str(tmp_path / "tb"), "--run-name", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: --run-name is for a run dir; a set's runs are named by "
                   "their axes")
    assert not (tmp_path / "tb").exists()
