"""Fixtures of the policy-server tests (the helpers are in policyhelpers.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from policyhelpers import EPISODES, build_openpi_python, run, same, spec
from runhelpers import episode_rows  # on the path once policyhelpers is imported


@pytest.fixture(scope="session")
def openpi_python() -> Path:
    """The real ``openpi-client``'s interpreter (built once, cached in the temp dir)."""
    return build_openpi_python()


@pytest.fixture(scope="session")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    rows = episode_rows(run(spec("model", 1), tmp_path_factory.mktemp("inproc")))
    assert len(rows) == EPISODES and all(r["status"] == "ok" for r in rows)
    return same(rows)


