"""``evaltui export``: every tracker carries summary.json's numbers, says when episodes
errored, and a second export updates the tracker's run instead of adding one.

All offline: TensorBoard event files read back with its EventAccumulator, MLflow on a
``sqlite:///`` store read back with MlflowClient, W&B with ``WANDB_MODE=offline`` and
its run file read back (wandb_records.py). A tracker that is not installed is skipped
with one line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from wandb_records import read_run

from evaltui.cli import main
from evaltui.rundir.jsonfiles import read_json

ERRORS_NOTE = "errors count as failures (2 of 6 episodes errored)"


def export(run_dir: Path, *args: str) -> int:
    return main(["export", str(run_dir), *args])


def numbers(summary: dict) -> dict[str, float]:
    """summary.json's numbers under the names every exporter uses."""
    out: dict[str, float] = {}
    for name, mean in summary["metrics"].items():
        out[name] = mean
        out[f"{name}/ci95_low"], out[f"{name}/ci95_high"] = summary["metrics_ci95"][name]
        out[f"{name}/n"] = summary["metrics_n"][name]
    out["episodes"] = summary["episodes_finished"]
    out["errors"] = summary["error_count"]
    return out


def test_tensorboard_event_files_read_back(errored_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="tensorboard not installed (evaltui[tensorboard])")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = tmp_path / "tb"
    assert export(errored_run, "--to", "tensorboard", "--logdir", str(logdir)) == 0
    assert export(errored_run, "--to", "tensorboard", "--logdir", str(logdir)) == 0
    (folder,) = logdir.iterdir()
    assert len(list(folder.iterdir())) == 1  # the second export replaced the first's file
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0,
                                                       "images": 0})
    acc.Reload()
    summary = read_json(errored_run / "summary.json")
    for key, want in numbers(summary).items():
        (event,) = acc.Scalars(f"summary/{key}")
        assert event.step == 6
        assert event.value == pytest.approx(want, rel=1e-6, abs=1e-7)  # stored as float32
    running = acc.Scalars("running_mean/success")
    assert [e.step for e in running] == list(range(1, 7))
    assert running[-1].value == pytest.approx(summary["metrics"]["success"], rel=1e-6)
    text = {tag: acc.Tensors(tag)[0].tensor_proto.string_val[0].decode()
            for tag in ("notes", "spec", "episodes")}
    assert ERRORS_NOTE in text["notes"]
    assert "CrashyBot" in text["spec"]
    cells = [line.split(" | ") for line in text["episodes"].splitlines()[2:]]
    assert [c[2] for c in cells] == ["ok", "error", "ok", "ok", "error", "ok"]
    (image,) = acc.Images("episode/ep0001")  # the errored episode comes first
    assert image.encoded_image_string.startswith(b"GIF8")
    assert image.width == 256  # BabyAI's 64 px frames, scaled up sharp for the tracker's UI


def test_mlflow_sqlite_store_reads_back_one_run(errored_run: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow", reason="mlflow not installed (evaltui[mlflow])")
    from mlflow.tracking import MlflowClient

    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # MLflow's own default put the artifacts in ./mlruns here
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["--to", "mlflow", "--tracking-uri", uri, "--project", "noise"]
    assert export(errored_run, *args, "--run-name", "first") == 0
    assert export(errored_run, *args, "--run-name", "second") == 0
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("noise")
    (run,) = client.search_runs([experiment.experiment_id])
    summary = read_json(errored_run / "summary.json")
    got = run.data.metrics
    for key, want in numbers(summary).items():
        assert got[key] == want
    for key in ("success", "running_mean/success"):
        history = client.get_metric_history(run.info.run_id, key)
        assert len(history) == (1 if key == "success" else 6)  # not logged twice
    assert history[-1].value == summary["metrics"]["success"] and history[-1].step == 6
    assert run.data.tags["evaltui.errored"] == "true"
    assert ERRORS_NOTE in run.data.tags["mlflow.note.content"]
    assert run.info.run_name == "second" and run.info.status == "FINISHED"
    assert run.data.params["spec.eval.episode_count"] == "6"
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"spec.json", "summary.json", "episodes.json", "media"} <= artifacts
    media = {a.path for a in client.list_artifacts(run.info.run_id, "media")}
    assert "media/ep0001.gif" in media
    assert not any(elsewhere.iterdir())  # nothing in the directory the export ran in
    assert any((tmp_path / "mlartifacts").rglob("ep0001.gif"))
    # An unset spec field is no param, not the string 'null'.
    assert "null" not in run.data.params.values() and "None" not in run.data.params.values()
    table = json.loads(Path(client.download_artifacts(run.info.run_id, "episodes.json",
                                                      str(tmp_path / "dl"))).read_text())
    status = table["columns"].index("status")
    assert [r[status] for r in table["data"]] == ["ok", "error", "ok", "ok", "error", "ok"]


def test_wandb_offline_files_read_back_under_one_run_id(errored_run: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    pytest.importorskip("wandb", reason="wandb not installed (evaltui[wandb])")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for var in ("WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR"):  # not the user's
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.chdir(tmp_path)
    args = ["--to", "wandb", "--project", "noise", "--dir", str(tmp_path / "w")]
    assert export(errored_run, *args) == 0
    assert export(errored_run, *args) == 0
    runs = sorted((tmp_path / "w" / "wandb").glob("offline-run-*"))
    assert len(runs) == 2  # W&B syncs both into one run: same id
    read = [read_run(r) for r in runs]
    assert read[0]["run_id"] == read[1]["run_id"]
    summary = read_json(errored_run / "summary.json")
    got = read[1]
    assert got["project"] == "noise" and "errored" in got["tags"]
    for key, want in numbers(summary).items():
        assert got["summary"][key] == want
    assert ERRORS_NOTE in got["summary"]["notes"]
    steps = [h["_step"] for h in got["history"]]
    assert steps == list(range(1, 7))
    assert got["history"][-1]["running_mean/success"] == summary["metrics"]["success"]
    assert got["config"]["spec"]["graph"]["nodesets"]["policy"]["impl"] == \
        "crashy_nodesets:CrashyBot"
    files = runs[1] / "files" / "media"
    (table_file,) = files.glob("table/episode_rows_*.table.json")
    assert len(json.loads(table_file.read_text())["data"]) == 6
    gifs = sorted(p.name.split("_")[0] for p in files.glob("videos/media/*.gif"))
    assert "ep0001" in gifs and all(p.read_bytes()[:4] == b"GIF8"
                                    for p in files.glob("videos/media/*.gif"))


def test_bad_export_flags_and_missing_extras_are_one_line(
        ok_run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    cases = [
        (["--to", "tensorboard"], "--to tensorboard needs --logdir D"),
        (["--to", "mlflow", "--logdir", "x"], "--logdir is for --to tensorboard, not --to mlflow"),
        (["--to", "wandb", "--tracking-uri", "u"], "--tracking-uri is for --to mlflow"),
    ]
    for args, message in cases:
        assert export(ok_run, *args) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1
    for tracker in ("wandb", "mlflow", "tensorboard"):
        monkeypatch.setitem(sys.modules, tracker, None)  # as if the extra were not installed
        extra = ["--logdir", "x"] if tracker == "tensorboard" else []
        assert export(ok_run, "--to", tracker, *extra) == 2
        err = capsys.readouterr().err.strip()
        assert err == (f"error: --to {tracker} needs the {tracker} package: "
                       f"pip install 'evaltui[{tracker}]'")
