"""The base of every run-dir record model (:mod:`evaltui.contract.records`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RecordModel(BaseModel):
    """A run-dir record: tolerant on read (fields it does not know are kept, so a file a
    newer version wrote loses nothing), frozen (a record is a value), and built on first
    use, so importers that need only the file names (rundir) pay nothing."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)
