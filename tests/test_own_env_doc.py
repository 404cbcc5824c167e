"""docs/own-env.md cannot rot: its worked example (docs/examples/frozenlake) runs for real,
and each of the five mistakes it quotes is reproduced and must print what the doc says."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "own-env.md"
EXAMPLE = ROOT / "docs" / "examples" / "frozenlake"


def evaltui(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "evaltui.cli", "eval", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def test_the_worked_example_runs_and_scores_its_extras(tmp_path: Path) -> None:
    out = evaltui(EXAMPLE, "lake_graph.json", "--dataset", "lakes.jsonl", "--episodes", "4",
                  "--workers", "2", "--json", "--outputs", str(tmp_path / "outputs"))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["state"] == "done"
    metrics = result["summary"]["metrics"]
    # The planner walks each lake's shortest path: exactly the dataset's reference.
    assert metrics["success"] == metrics["spl"] == metrics["ndtw"] == 1.0
    assert metrics["fell_in_hole"] == 0.0 and metrics["steps"] == 6.0
    assert result["summary"]["metrics_n"]["steps"] == 4


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """A copy of the example to break."""
    dst = tmp_path / "lake"
    shutil.copytree(EXAMPLE, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def error_line(proc: subprocess.CompletedProcess[str], here: Path) -> str:
    [line] = [ln for ln in proc.stderr.splitlines() if ln.startswith("error")]
    return line.replace(str(here) + "/", ".../")


def break_line(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_the_five_mistakes_print_what_the_doc_quotes(lake: Path, tmp_path: Path) -> None:
    doc = DOC.read_text()
    outputs = str(tmp_path / "outputs")
    quoted = []
    # 1. another directory: the workspace is the current one
    proc = evaltui(tmp_path, str(lake / "lake_graph.json"), "--dataset",
                   str(lake / "lakes.jsonl"), "--outputs", outputs)
    assert proc.returncode == 2
    quoted.append(error_line(proc, lake))
    # 2. a SyntaxError in the env module
    break_line(lake / "lake_env.py", "-> dict[str, Any]:\n        \"\"\"Build the episode's map",
               "-> dict[str, Any]\n        \"\"\"Build the episode's map")
    proc = evaltui(lake, "lake_graph.json", "--dataset", "lakes.jsonl", "--outputs", outputs)
    assert proc.returncode == 2
    quoted.append(error_line(proc, lake))
    shutil.copy(EXAMPLE / "lake_env.py", lake / "lake_env.py")
    # 3. a param out of its bounds
    proc = evaltui(lake, "lake_graph.json", "--dataset", "lakes.jsonl", "--set",
                   "policy.epsilon=1.5", "--outputs", outputs)
    assert proc.returncode == 2
    quoted.append(error_line(proc, lake))
    # 4. a dataset line without episode_id
    lines = (lake / "lakes.jsonl").read_text().splitlines()[:2]
    (lake / "bad.jsonl").write_text("\n".join(lines) + '\n{"id": "lake-9"}\n')
    proc = evaltui(lake, "lake_graph.json", "--dataset", "bad.jsonl", "--outputs", outputs)
    assert proc.returncode == 2
    quoted.append(error_line(proc, lake))
    assert not Path(outputs).exists()  # refused before anything was written
    # 5. a step node that forgets its `done` output
    break_line(lake / "lake_env.py", '"done": terminated or truncated,\n', "\n")
    proc = evaltui(lake, "lake_graph.json", "--dataset", "lakes.jsonl", "--episodes", "2",
                   "--outputs", outputs)
    assert proc.returncode == 1
    quoted.append(error_line(proc, lake))
    for line in quoted:
        assert line in doc, f"docs/own-env.md does not quote what evaltui says:\n{line}"


def test_the_readme_links_the_walkthrough() -> None:
    assert "docs/own-env.md" in (ROOT / "README.md").read_text()
