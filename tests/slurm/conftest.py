"""The ``slurm`` tests' session cluster (:mod:`slurmcluster`): skipped, one line, where
slurm-wlm or munge is not installed or the tests do not run as root."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from slurmcluster import SlurmCluster, two_node_cluster, why_not_available  # noqa: E402


@pytest.fixture(scope="session")
def slurm_session() -> Iterator[SlurmCluster]:
    if (why := why_not_available()) is not None:
        pytest.skip(why)
    with two_node_cluster() as cluster:
        yield cluster


@pytest.fixture
def slurm_cluster(slurm_session: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    """The session cluster, with this test's environment pointing at it: SLURM_CONF set,
    and no SLURM_* variable of an enclosing job (inside one, srun would use its
    allocation instead of asking this cluster for one)."""
    for key in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SLURM_CONF", str(slurm_session.conf))
    return slurm_session
