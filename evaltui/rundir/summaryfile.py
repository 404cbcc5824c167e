"""Reading a run's summary.json: the one place that opens it for the layers above the run
process (which owns writing it, ``engine/run/summary.py``).

``read_summary_header`` gives the header through its model (:class:`SummaryHeader`), the rows
left out; a field that does not fit its schema reads as its default, as the status read
does. ``read_summary`` gives the file as written, rows included, for the few readers that
serve or scan raw rows. Both say None for a summary that is missing, unreadable (torn,
garbage) or not a JSON object: the run has not written one yet, or it is being replaced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evaltui.contract.recordparse import parse_lenient
from evaltui.contract.records import SUMMARY_FILENAME, SummaryHeader
from evaltui.rundir.jsonfiles import read_json_object


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """summary.json as written (its ``episodes`` rows included), or None."""
    return read_json_object(Path(run_dir) / SUMMARY_FILENAME)


def summary_header(data: dict[str, Any] | None) -> SummaryHeader | None:
    """A summary read by :func:`read_summary` as its header model (rows left out), or None
    when it has no usable ``status``."""
    if data is None:
        return None
    return parse_lenient(SummaryHeader, {k: v for k, v in data.items() if k != "episodes"})[0]


def read_summary_header(run_dir: Path) -> SummaryHeader | None:
    """summary.json's header through its model, or None."""
    return summary_header(read_summary(run_dir))
