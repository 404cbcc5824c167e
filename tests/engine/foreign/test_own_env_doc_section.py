"""docs/own-env.md section 6 runs as written: the FrozenLake example's env in its own
environment (numpy 1.x) gives the rows of the same graph in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ownenv_helpers import rows, run_dir_of

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "frozenlake"


def evaltui(graph: str, outputs: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaltui.cli", "eval", graph, "--dataset",
                           "lakes.jsonl", "--workers", "2", "--outputs", str(outputs)],
                          cwd=EXAMPLE, env={**os.environ, "COLUMNS": "200"},
                          capture_output=True, text=True, timeout=300)


def test_the_example_env_in_its_own_environment_gives_the_in_process_rows(
        env_cache: Path, tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "own-env.md").read_text()
    graph = json.loads((EXAMPLE / "lake_graph_own_env.json").read_text())
    environment = graph["nodesets"]["env"]["environment"]
    assert json.dumps(environment["requirements"]).replace(", ", ",") in \
        doc.replace(", ", ",")  # the doc shows the example's field
    own = evaltui("lake_graph_own_env.json", tmp_path / "own" / "out")
    assert own.returncode == 0, own.stderr
    ref = evaltui("lake_graph.json", tmp_path / "ref" / "out")
    assert ref.returncode == 0, ref.stderr
    got = rows(run_dir_of(tmp_path / "own"))
    want = rows(run_dir_of(tmp_path / "ref"))
    for row in got + want:
        row.pop("graph_name")
    assert got == want and len(got) == 6
