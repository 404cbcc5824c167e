"""The executors the conformance suite runs over: add a parameter here for a new one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass(frozen=True)
class Executor:
    """An executor under test: its name and the ``eval`` fields that select it."""

    name: str
    eval_fields: dict[str, Any] = field(default_factory=dict)


EXECUTORS = [pytest.param("local", id="local"),
             pytest.param("ray", id="ray", marks=pytest.mark.ray),
             pytest.param("slurm", id="slurm", marks=pytest.mark.slurm)]


