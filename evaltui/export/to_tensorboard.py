"""``evaltui export RUN --to tensorboard --logdir D``: one event file per run.

Written with the ``tensorboard`` package alone (its event-file writer and protos; no
TensorFlow, no torch): scalars ``summary/<metric>`` (and ``/ci95_low``, ``/ci95_high``,
``/n``) at the step of the episodes finished, ``running_mean/<metric>`` (and its CI
bounds) at every episode count, text ``spec`` / ``notes`` / ``episodes`` (a Markdown
table), and images ``episode/epNNNN`` (animated GIFs). The run's folder is
``D/[PROJECT/]RUN_NAME``; a second export replaces the event file the first wrote there
(files named ``*.evaltui``), so TensorBoard never shows a run twice.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from PIL import Image
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from evaltui.export import payload
from evaltui.export.setmember import SetMember
from evaltui.runview.snapshot import RunSnapshot

SUFFIX = ".evaltui"
"""Ends the name of every event file evaltui writes (and so may replace)."""
TABLE_ROWS = 1000
"""Rows of the episode table in the Markdown text; the rest are counted, not shown."""


def _scalar(tag: str, value: float) -> summary_pb2.Summary.Value:
    return summary_pb2.Summary.Value(tag=tag, simple_value=float(value))


def _text(tag: str, text: str) -> summary_pb2.Summary.Value:
    meta = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[text.encode()],
                                    tensor_shape=TensorShapeProto())
    return summary_pb2.Summary.Value(tag=tag, metadata=meta, tensor=tensor)


def _image(tag: str, path: Path) -> summary_pb2.Summary.Value:
    with Image.open(path) as im:
        width, height = im.size
    image = summary_pb2.Summary.Image(height=height, width=width, colorspace=3,
                                      encoded_image_string=path.read_bytes())
    return summary_pb2.Summary.Value(tag=tag, image=image)


def markdown_table(columns: list[str], rows: list[list[Any]]) -> str:
    def cell(value: Any) -> str:
        text = "" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows[:TABLE_ROWS]]
    if len(rows) > TABLE_ROWS:
        lines.append(f"\n{len(rows) - TABLE_ROWS} more rows: see the run dir's summary.json")
    return "\n".join(lines)


def _folder_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", name).strip("_")


def run_folder(logdir: Path, snap: RunSnapshot, project: str | None,
               name: str | None, member: SetMember | None = None) -> Path:
    base = logdir / project if project else logdir
    if member is not None:  # D/[PROJECT/]SET_ID/<axis values>
        return base / _folder_name(member.set_id) / _folder_name(name or member.label)
    return base / _folder_name(payload.run_name(snap, name))


def export(snap: RunSnapshot, *, logdir: Path, project: str | None = None,
           run_name: str | None = None, member: SetMember | None = None) -> Path:
    """Write the run's event file under ``logdir``; return the run's folder. A set's
    ``member`` goes under the set's folder, with text ``set`` (its axes) and, for a
    checkpoint, ``checkpoint/<metric>`` at the checkpoint's step."""
    target = run_folder(Path(logdir), snap, project, run_name, member)
    target.mkdir(parents=True, exist_ok=True)
    values = payload.summary_values(snap)
    last = int(values.get("episodes", 0))
    events: list[tuple[int, list[summary_pb2.Summary.Value]]] = []
    for name, points in payload.series(snap).items():
        for p in points:
            vals = [_scalar(f"running_mean/{name}", p.mean)]
            if p.low is not None and p.high is not None:
                vals += [_scalar(f"running_mean/{name}/ci95_low", p.low),
                         _scalar(f"running_mean/{name}/ci95_high", p.high)]
            events.append((p.episodes, vals))
    columns, rows = payload.table(snap)
    final = [_scalar(f"summary/{k}", v) for k, v in values.items()]
    final += [_text("spec", "```json\n" + json.dumps(payload.config(snap), indent=2) + "\n```"),
              _text("notes", "\n\n".join(snap.notes()) or "no errors; run finished"),
              _text("episodes", markdown_table(columns, rows))]
    if member is not None:
        final.append(_text("set", "```json\n" + json.dumps(member.config(), indent=2)
                           + "\n```"))
        if member.step is not None:
            events.append((member.step, [_scalar(k, v) for k, v
                                         in member.checkpoint_values(snap).items()]))
    with tempfile.TemporaryDirectory(prefix=".evaltui-", dir=target) as tmp:
        for index, gif in payload.write_gifs(snap, Path(tmp) / "gifs").items():
            final.append(_image(f"episode/ep{index:04d}", gif))
    events.append((last, final))
    return _write_events(target, events)


def _write_events(target: Path, events: list[tuple[int, list[summary_pb2.Summary.Value]]]
                  ) -> Path:
    """Write ``events`` (step, values) as ``target``'s event file, in place of the one an
    earlier export wrote; return ``target``."""
    wall = time.time()
    with tempfile.TemporaryDirectory(prefix=".evaltui-", dir=target) as tmp:
        writer = EventFileWriter(tmp, filename_suffix=SUFFIX)
        for step, vals in events:
            writer.add_event(event_pb2.Event(wall_time=wall, step=step,
                                             summary=summary_pb2.Summary(value=vals)))
        writer.close()
        (written,) = Path(tmp).glob(f"events.out.tfevents.*{SUFFIX}")
        for old in target.glob(f"events.out.tfevents.*{SUFFIX}"):
            old.unlink()
        shutil.move(str(written), target / written.name)
    return target


def export_set_curve(logdir: Path, project: str | None, set_id: str, group: str,
                     curves: dict[str, list[tuple[int, float]]]) -> Path:
    """One more run beside a set's members, ``curve_<group>``: each metric's mean at
    every checkpoint step, so TensorBoard draws it as one line. Its folder."""
    base = Path(logdir) / project if project else Path(logdir)
    target = base / _folder_name(set_id) / _folder_name(f"curve_{group}")
    target.mkdir(parents=True, exist_ok=True)
    by_step: dict[int, list[summary_pb2.Summary.Value]] = {}
    for name, points in curves.items():
        for step, value in points:
            by_step.setdefault(step, []).append(_scalar(name, value))
    return _write_events(target, sorted(by_step.items()))
