"""The executor conformance suite: every test runs once per executor (``executor``).

A new executor joins by adding its parameter to :data:`executor_params.EXECUTORS` (and, if
it needs a cluster, a fixture as Ray's ``ray_cluster``): it passes this suite before
anything else.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parents[1]
for folder in ("engine", "executors"):  # runhelpers, pool_helpers, faulty_nodesets; params
    if str(TESTS / folder) not in sys.path:
        sys.path.insert(0, str(TESTS / folder))

from executor_params import EXECUTORS, Executor  # noqa: E402
from runhelpers import ENGINE_TESTS  # noqa: E402


@pytest.fixture(params=EXECUTORS)
def executor(request: pytest.FixtureRequest) -> Executor:
    if request.param == "ray":
        cluster = request.getfixturevalue("ray_cluster")
        return Executor("ray", {"executor": "ray", "ray_address": cluster.address})
    if request.param == "slurm":
        request.getfixturevalue("slurm_allocation")
        return Executor("slurm", {"executor": "slurm"})
    return Executor(request.param)


@pytest.fixture
def slurm_allocation(slurm_session: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A Slurm allocation on both nodes that this test's run processes are inside
    (``slurmcluster.allocation``)."""
    sys.path.insert(0, str(TESTS / "slurm"))
    from slurmcluster import allocation

    with allocation(slurm_session, monkeypatch) as job:
        yield job


@pytest.fixture(autouse=True)
def importable_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ENGINE_TESTS))
