"""A nodeset in its own Python environment on the Slurm executor: built where the spec is
checked, into a cache the nodes see at the same path (here: one filesystem), and every
step starts its env hosts in it; the steps build nothing."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

FOREIGN = Path(__file__).resolve().parents[1] / "engine" / "foreign"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
sys.path.insert(0, str(FOREIGN))

from ownenv_helpers import NUMPY1, cartpole_graph, write_dataset  # noqa: E402
from runhelpers import episode_rows, run_to_end  # noqa: E402
from slurmcluster import SlurmCluster  # noqa: E402

from evaltui.engine.foreign.envcache import MARKER  # noqa: E402


@pytest.mark.slurm
def test_steps_start_their_env_hosts_in_the_environment_on_the_shared_cache(
        slurm_session: SlurmCluster, slurm_allocation: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "shared-cache"
    monkeypatch.setenv("EVALTUI_ENV_CACHE", str(cache))  # the steps inherit it (srun)
    monkeypatch.syspath_prepend(str(FOREIGN))  # the check here imports the policy
    seen = tmp_path / "seen"
    seen.mkdir()
    graph = cartpole_graph({"requirements": NUMPY1}, numpy_major=1, python_in=str(seen))
    spec = {"graph": graph, "active_workspace_dir": str(FOREIGN),
            "eval": {"dataset": str(write_dataset(tmp_path / "eps.jsonl", 4)),
                     "executor": "slurm", "worker_count": 2}}
    run_dir = run_to_end(spec, tmp_path / "out", timeout=300)
    rows = episode_rows(run_dir)
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows), \
        (run_dir / "run.log").read_text()[-3000:]
    (built,) = cache.glob(f"*/{MARKER}")  # built once, where the spec was checked
    assert json.loads(built.read_text())["builder"] in ("uv", "pip")
    assert len(re.findall(r"^\$ .* venv ", (cache / f"{built.parent.name}.log").read_text(),
                          re.MULTILINE)) == 1, "a step built it again"
    pythons = {p.read_text() for p in seen.glob("python.*")}
    assert pythons == {str(built.parent / "bin" / "python")}
    nodes = set(re.findall(r"worker \d+ is step \S+, pid \d+ on node (\w+)",
                           (run_dir / "run.log").read_text()))
    assert nodes == {"n1", "n2"}
