"""Reading back a W&B offline run's ``run-<id>.wandb`` file (for the export tests).

wandb 0.31 no longer ships a Python reader (its core is Go), so this is the file's
format, a LevelDB-style log: a 7-byte header (``:W&B``, magic 0xBEE1, version 0), then
32 KiB blocks of chunks ``<crc32 I><length H><type B>`` + data, a record being one FULL
chunk or FIRST, MIDDLE..., LAST; a block's tail shorter than a chunk header is padding.
Each record is a ``wandb_internal_pb2.Record``.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

BLOCK = 32768
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[Any]:
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", "not a W&B run file"
    pos, parts, out = HEADER, [], []
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:
            pos += left
            continue
        _crc, length, kind = struct.unpack_from("<IHB", data, pos)
        chunk = data[pos + HEADER: pos + HEADER + length]
        pos += HEADER + length
        if kind == FULL:
            parts = [chunk]
        elif kind in (FIRST, MIDDLE):
            parts = [chunk] if kind == FIRST else parts + [chunk]
            continue
        elif kind == LAST:
            parts.append(chunk)
        else:
            break  # zero padding at the end of the file
        record = pb.Record()
        record.ParseFromString(b"".join(parts))
        out.append(record)
    return out


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def read_run(run_dir: Path) -> dict[str, Any]:
    """``{run_id, name, project, config, summary, history: [{key: value}], tags}``."""
    (path,) = Path(run_dir).glob("run-*.wandb")
    found: dict[str, Any] = {"config": {}, "summary": {}, "history": [], "tags": []}
    for rec in records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            found.update(run_id=rec.run.run_id, name=rec.run.display_name,
                         project=rec.run.project, tags=list(rec.run.tags),
                         group=rec.run.run_group)
            for item in rec.run.config.update:
                found["config"][_key(item)] = json.loads(item.value_json)
        elif kind == "config":
            for item in rec.config.update:
                found["config"][_key(item)] = json.loads(item.value_json)
        elif kind == "history":
            found["history"].append({_key(i): json.loads(i.value_json) for i in rec.history.item})
        elif kind == "summary":
            for item in rec.summary.update:
                found["summary"][_key(item)] = json.loads(item.value_json)
    return found
