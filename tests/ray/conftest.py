"""The ``ray`` tests' session cluster (:mod:`raycluster`): skipped, one line, without ray."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))  # runhelpers
sys.path.insert(0, str(Path(__file__).resolve().parent))

from raycluster import RayCluster, two_node_cluster  # noqa: E402


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.ray)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'evaltui[ray]')")
    with two_node_cluster() as cluster:
        yield cluster
