"""Set test fixtures: set files in tmp_path, the CLI in-process, runs killed at teardown."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from proctools import kill_runs  # noqa: E402


@pytest.fixture
def outputs(isolated_dirs: dict[str, Path]) -> Iterator[Path]:
    """The outputs root of the test; every run still alive under it is killed after."""
    yield isolated_dirs["outputs"]
    kill_runs(isolated_dirs["outputs"])


@pytest.fixture
def set_file(tmp_path: Path) -> Callable[..., Path]:
    """Write a set file (YAML) into tmp_path and return its path."""

    def write(data: dict[str, Any], name: str = "set.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write
