"""The ``slurm`` tests' cluster, per test (the session's, ``slurm_session`` in
tests/conftest.py: one for every folder that asks, tests/slurm and tests/executors)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from slurmcluster import SlurmCluster, allocation  # noqa: E402


@pytest.fixture
def slurm_cluster(slurm_session: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    """The session cluster, with this test's environment pointing at it: SLURM_CONF set,
    and no SLURM_* variable of an enclosing job (inside one, srun would use its
    allocation instead of asking this cluster for one)."""
    for key in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SLURM_CONF", str(slurm_session.conf))
    return slurm_session


@pytest.fixture
def slurm_allocation(slurm_session: SlurmCluster, monkeypatch: pytest.MonkeyPatch
                     ) -> Iterator[str]:
    """A Slurm allocation on both nodes that this test's run processes are inside."""
    with allocation(slurm_session, monkeypatch) as job:
        yield job
