"""Fixtures of the own-environment tests: a cache of built environments for the session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def env_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """EVALTUI_ENV_CACHE for the session (the tests' subprocesses inherit it)."""
    path = tmp_path_factory.mktemp("envcache")
    before = os.environ.get("EVALTUI_ENV_CACHE")
    os.environ["EVALTUI_ENV_CACHE"] = str(path)
    yield path
    if before is None:
        os.environ.pop("EVALTUI_ENV_CACHE", None)
    else:
        os.environ["EVALTUI_ENV_CACHE"] = before

