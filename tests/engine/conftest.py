"""Fixtures of every engine test: the folder's test nodesets (faulty_nodesets, ...)
importable by the specs' ``impl`` strings, and short socket dirs."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ENGINE_TESTS = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def importable_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ENGINE_TESTS))


@pytest.fixture()
def sockets() -> Iterator[Path]:
    # Short paths: a unix socket path must fit in 107 bytes, pytest's tmp_path may not.
    path = Path(tempfile.mkdtemp(prefix="evt-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
