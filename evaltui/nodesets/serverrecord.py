"""What a run's policy-server clients leave in the run dir, and reading it back.

A client nodeset runs in a worker whose working directory is the run dir (the run process
is started there and its workers are forks of it). Each worker writes

- ``policy_server/metadata.json``: the server's metadata frame, its URL and when it was
  first read (written once, by the first worker to connect);
- ``policy_server/latency-<pid>.json``: that worker's per-step round-trip times in ms
  (a bounded sample, newest kept), rewritten at each episode's start and at close.

:func:`read_latency` merges the workers' samples into p50/p99 for ``evaltui show``, the
TUI and the report. Outside a run dir (a nodeset used in a script) nothing is written.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from evaltui.contract.records import SPEC_FILENAME
from evaltui.rundir.jsonfiles import read_json, read_json_object, write_json_atomic
from evaltui.rundir.layout import now_iso

DIR = "policy_server"
METADATA = "metadata.json"
MAX_SAMPLES = 20_000


def record_dir() -> Path | None:
    """The run dir's ``policy_server/`` when this process runs inside a run dir."""
    cwd = Path.cwd()
    return cwd / DIR if (cwd / SPEC_FILENAME).is_file() else None


def _plain(value: Any) -> Any:
    """Metadata as JSON: arrays as lists, bytes as text."""
    if isinstance(value, Mapping):
        return {str(k.decode() if isinstance(k, bytes) else k): _plain(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value


def record_metadata(url: str, metadata: Any) -> None:
    """Write the server's metadata once per run (the first worker to connect wins)."""
    where = record_dir()
    if where is None or (where / METADATA).exists():
        return
    where.mkdir(exist_ok=True)
    write_json_atomic(where / METADATA, {"url": url, "read_at": now_iso(),
                                         "metadata": _plain(metadata)}, durable=False)


class LatencySamples:
    """One worker's round-trip times; :meth:`save` writes them to the run dir."""

    def __init__(self) -> None:
        self.samples: deque[float] = deque(maxlen=MAX_SAMPLES)

    def add(self, ms: float) -> None:
        self.samples.append(round(ms, 4))

    def save(self) -> None:
        where = record_dir()
        if where is None or not self.samples:
            return
        where.mkdir(exist_ok=True)
        write_json_atomic(where / f"latency-{os.getpid()}.json",
                          {"ms": list(self.samples)}, durable=False)


def read_latency(run_dir: Path) -> dict[str, Any] | None:
    """p50/p99/mean of every worker's round-trip times, or None when none were recorded."""
    samples: list[float] = []
    for path in sorted((run_dir / DIR).glob("latency-*.json")):
        try:
            samples.extend(float(x) for x in read_json(path).get("ms", []))
        except (OSError, ValueError, AttributeError, TypeError):
            continue  # a torn or foreign file is not worth failing a report
    if not samples:
        return None
    arr = np.asarray(samples)
    return {"steps": len(samples), "p50_ms": round(float(np.percentile(arr, 50)), 3),
            "p99_ms": round(float(np.percentile(arr, 99)), 3),
            "mean_ms": round(float(arr.mean()), 3)}


def read_metadata(run_dir: Path) -> dict[str, Any] | None:
    return read_json_object(run_dir / DIR / METADATA)
