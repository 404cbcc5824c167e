"""``evaltui export RUN --to mlflow --tracking-uri U``: one MLflow run per run dir.

The experiment is ``--project`` (default ``evaltui``). The run is found again by its tag
``evaltui.run_key`` (:func:`payload.run_key`), so a second export logs into the same run.
Everything logged is idempotent: params are the spec (which never changes for a run
dir), metrics carry fixed timestamps and steps (MLflow drops a metric identical to one it
has), artifacts are overwritten at their paths, and what does change (state, notes) is a
tag. Metrics: ``<metric>`` (+ ``/ci95_low``, ``/ci95_high``, ``/n``) at the step of the
episodes finished, ``running_mean/<metric>`` at every episode count. Artifacts:
``spec.json``, ``summary.json`` (the numbers shared), ``episodes.json`` (the table as
``{columns, data}``) and ``media/epNNNN.gif``. A value the spec leaves unset (``null``)
is no param (MLflow would show the string ``'null'``). With a ``sqlite:///DB`` store
the experiment's artifacts go beside DB (``mlartifacts/``), not to ``./mlruns`` under
whatever directory the export ran in.
"""

from __future__ import annotations

import json
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from evaltui.export import payload
from evaltui.export.setmember import SetMember
from evaltui.runview.snapshot import RunSnapshot

DEFAULT_EXPERIMENT = "evaltui"
KEY_TAG = "evaltui.run_key"
SET_TAG = "evaltui.set_id"
PARAM_VALUE_CHARS = 6000
"""MLflow's limit on a param value; a longer value is cut (the whole spec is spec.json)."""
_BATCH = 900  # MLflow takes at most 1000 entities a log_batch


def _epoch_ms(value: Any) -> int:
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value).timestamp() * 1000)
        except ValueError:
            pass  # not an ISO time: the fixed timestamp 0 below
    return 0


def artifact_location(tracking_uri: str | None) -> str | None:
    """Where a new experiment's artifacts go: beside a sqlite store's file; else MLflow's
    choice (a file store keeps them inside, a server decides)."""
    if tracking_uri and tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri.removeprefix("sqlite:///").split("?", 1)[0])
        if not db.is_absolute():
            db = Path.cwd() / db  # what MLflow itself makes of a relative sqlite path
        return (db.parent / "mlartifacts").as_uri()
    return None


def experiment_id(client: MlflowClient, experiment: str) -> str:
    """``experiment``'s id, made (with :func:`artifact_location`) at the first export."""
    found = client.get_experiment_by_name(experiment)
    if found is not None:
        return found.experiment_id
    return client.create_experiment(
        experiment, artifact_location=artifact_location(client.tracking_uri))


def find_or_create_run(client: MlflowClient, experiment: str, key: str, name: str,
                       **tags: str) -> str:
    """The id of the MLflow run tagged ``key`` in ``experiment`` (made, with ``tags``,
    at the first export)."""
    exp_id = experiment_id(client, experiment)
    runs = client.search_runs([exp_id], filter_string=f"tags.`{KEY_TAG}` = '{key}'",
                              max_results=1)
    if runs:
        return runs[0].info.run_id
    return client.create_run(exp_id, run_name=name, tags={KEY_TAG: key, **tags}).info.run_id


def _log_metrics(client: MlflowClient, run_id: str, metrics: list[Metric]) -> None:
    for i in range(0, len(metrics), _BATCH):
        client.log_batch(run_id, metrics=metrics[i:i + _BATCH])


def export(snap: RunSnapshot, *, tracking_uri: str | None, project: str | None = None,
           run_name: str | None = None, member: SetMember | None = None,
           parent_run_id: str | None = None) -> str:
    """Log the run to MLflow; return ``experiment/run_id``. A set's ``member`` is a child
    of the set's run ``parent_run_id``, with its axes as ``set.<axis>`` params and, for a
    checkpoint, ``checkpoint/<metric>`` at the checkpoint's step."""
    client = MlflowClient(tracking_uri)
    experiment = project or DEFAULT_EXPERIMENT
    name = payload.run_name(snap, member.name(run_name) if member is not None else run_name)
    run_id = find_or_create_run(client, experiment, payload.run_key(snap), name)
    stamp = _epoch_ms(snap.summary.get("started_at"))
    values = payload.summary_values(snap)
    last = int(values.get("episodes", 0))
    metrics = [Metric(k, float(v), stamp, last) for k, v in values.items()]
    for metric, points in payload.series(snap).items():
        for p in points:
            metrics.append(Metric(f"running_mean/{metric}", p.mean, stamp, p.episodes))
            if p.low is not None and p.high is not None:
                metrics += [Metric(f"running_mean/{metric}/ci95_low", p.low, stamp, p.episodes),
                            Metric(f"running_mean/{metric}/ci95_high", p.high, stamp,
                                   p.episodes)]
    conf = payload.config(snap)
    params = [Param(k[:250], (v if isinstance(v, str) else json.dumps(v))[:PARAM_VALUE_CHARS])
              for k, v in payload.flat({"spec": conf["spec"]}) if v is not None]
    evaltui = conf["evaltui"]
    params += [Param(f"evaltui.{k}", str(evaltui[k])) for k in
               ("graph_name", "dataset", "split", "worker_count", "executor")
               if evaltui[k] is not None]
    notes = snap.notes()
    tags = [RunTag("mlflow.runName", name), RunTag("evaltui.run_id", snap.run_id),
            RunTag("evaltui.state", snap.state.value),
            RunTag("evaltui.run_dir", str(snap.run_dir)),
            RunTag("evaltui.numbers_from", snap.numbers_from),
            RunTag("evaltui.errored", str(snap.error_count > 0).lower()),
            RunTag("mlflow.note.content", "\n\n".join(notes) or "no errors; run finished")]
    if member is not None:
        tags += [RunTag(SET_TAG, member.set_id), RunTag("evaltui.set.member_key", member.key)]
        if parent_run_id is not None:
            tags.append(RunTag("mlflow.parentRunId", parent_run_id))
        params += [Param(f"set.{k}"[:250], json.dumps(v) if not isinstance(v, str) else v)
                   for k, v in member.axes.items()]
        metrics += [Metric(k, v, stamp, member.step)
                    for k, v in member.checkpoint_values(snap).items()]
    for i in range(0, len(params), 100):
        client.log_batch(run_id, params=params[i:i + 100])
    _log_metrics(client, run_id, metrics)
    client.log_batch(run_id, tags=tags)
    columns, rows = payload.table(snap)
    client.log_dict(run_id, conf, "spec.json")
    client.log_dict(run_id, {k: v for k, v in snap.summary.items() if k != "episodes"},
                    "summary.json")
    client.log_dict(run_id, {"columns": columns, "data": rows}, "episodes.json")
    with tempfile.TemporaryDirectory(prefix="evaltui-mlflow-") as tmp:
        for gif in payload.write_gifs(snap, Path(tmp)).values():
            client.log_artifact(run_id, str(gif), "media")
    if snap.finished:
        client.set_terminated(run_id, "FAILED" if snap.state.value in ("failed", "aborted")
                              else "KILLED" if snap.state.value == "cancelled" else "FINISHED",
                              end_time=_epoch_ms(snap.summary.get("finished_at")) or None)
    return f"{experiment}/{run_id}"


def set_parent_run(tracking_uri: str | None, set_id: str, project: str | None,
                   curves: dict[str, list[tuple[int, float]]]) -> str:
    """The set's own run (found again by its ``evaltui.set_id`` tag and no parent): the
    members are its children; ``curves`` (``<metric>/<group>`` -> (step, mean)) are its
    metrics over the checkpoint steps. Its MLflow run id."""
    client = MlflowClient(tracking_uri)
    experiment = project or DEFAULT_EXPERIMENT
    run_id = find_or_create_run(client, experiment, f"evaltui-set-{set_id}", f"set {set_id}",
                                **{SET_TAG: set_id})
    _log_metrics(client, run_id, [Metric(name, value, 0, step)
                                  for name, points in curves.items() for step, value in points])
    client.set_terminated(run_id, "FINISHED")
    return run_id
