"""Suite-wide isolation: no test reads or writes the user's own state dir, outputs or
config dir (their own themes would change the TUI tests)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fulldisk import maybe_small_disk, small_disk  # noqa: F401  (tmpfs fixtures: ENOSPC)
from sigterm import teardown_on_sigterm


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    state = tmp_path_factory.mktemp("state")
    outputs = tmp_path_factory.mktemp("outputs")
    monkeypatch.setenv("EVALTUI_STATE_DIR", str(state))
    monkeypatch.setenv("EVALTUI_OUTPUTS", str(outputs))
    monkeypatch.setenv("EVALTUI_CONFIG_DIR", str(tmp_path_factory.mktemp("config")))
    # Never the machine's shared reservation ledger (/var/lib/evaltui/ledger, if set up).
    monkeypatch.setenv("EVALTUI_LEDGER_DIR", "per-user")
    monkeypatch.delenv("EVALTUI_FAKE_GPUS", raising=False)
    # CPU cores are admitted like memory (issue 34): tests of the other rules start many
    # small runs at once on a 2-core box, so they count on a big machine; the tests of
    # CPU admission set their own EVALTUI_CPUS.
    monkeypatch.setenv("EVALTUI_CPUS", "1024")
    return {"state": Path(state), "outputs": Path(outputs)}


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio: never parametrize the async tests over trio, even where
    trio happens to be installed."""
    return "asyncio"


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The two-node local Ray cluster (tests/ray/raycluster.py), once a session for every
    folder that asks (tests/ray, tests/executors); skipped, one line, without ray. Each
    node has its own cache of built environments (``env_caches``: its raylet's
    EVALTUI_ENV_CACHE, named as the node's temp dir), for tests/ray/test_ray_own_env.py."""
    pytest.importorskip("ray", reason="ray is not installed (pip install 'evaltui[ray]')")
    sys.path.insert(0, str(Path(__file__).resolve().parent / "ray"))
    from raycluster import two_node_cluster

    root = tmp_path_factory.mktemp("nodecaches")
    caches = [{"EVALTUI_ENV_CACHE": str(root / name)} for name in ("head", "node2")]
    with teardown_on_sigterm(), two_node_cluster(caches) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def slurm_session() -> Iterator[Any]:
    """The private two-node Slurm cluster (tests/slurm/slurmcluster.py), once a session for
    every folder that asks (tests/slurm, tests/executors); skipped, one line, where
    slurm-wlm or munge is not installed or the tests do not run as root."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "slurm"))
    from slurmcluster import two_node_cluster, why_not_available

    if (why := why_not_available()) is not None:
        pytest.skip(why)
    with teardown_on_sigterm(), two_node_cluster() as cluster:
        yield cluster
