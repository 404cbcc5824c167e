"""A user's nodeset module that fails at import, or a constructor that raises: one line
naming their file and line, the exception and its message (issue 25)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from runhelpers import builtin_graph

BROKEN_MODULES = {
    "syntax": ("import os\ndef act(:\n    pass\n", "mine.py:2: SyntaxError: invalid syntax"),
    "raises": ("import os\n\nraise RuntimeError('no GPU here')\n",
               "mine.py:3: RuntimeError: no GPU here"),
    "imports": ("import os\nimport no_such_dependency_xyz\n",
                "mine.py:2: ModuleNotFoundError: No module named 'no_such_dependency_xyz'"),
    "exits": ("import sys\n\nsys.exit('usage: mine.py CONFIG')\n",
              "mine.py:3: SystemExit: usage: mine.py CONFIG"),
}


def write_graph(tmp_path: Path, module_text: str) -> Path:
    (tmp_path / "mine.py").write_text(module_text)
    graph = builtin_graph("bot")
    graph["nodesets"]["policy"]["impl"] = "mine:Policy"
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(graph))
    return path


def evaltui(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaltui.cli", "eval", *args,
                           "--outputs", str(tmp_path / "outputs")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)


# "syntax" and "raises" are rows of tests/test_hostile_inputs.py too; here the field
# and the whole path are checked as well.
@pytest.mark.parametrize("case", sorted(BROKEN_MODULES))
def test_a_module_failing_at_import_is_one_line_with_its_file_and_line(
        case: str, tmp_path: Path) -> None:
    text, expected = BROKEN_MODULES[case]
    out = evaltui(tmp_path, str(write_graph(tmp_path, text)), "--episodes", "1")
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().count("\n") == 0, out.stderr
    assert "graph.nodesets.policy.impl" in out.stderr
    assert f"{tmp_path / expected}" in out.stderr
    assert "Traceback" not in out.stderr and "before it took the spec" not in out.stderr
    assert not (tmp_path / "outputs").exists()


def test_verbose_prints_the_traceback_of_a_module_failing_at_import(tmp_path: Path) -> None:
    graph = write_graph(tmp_path, BROKEN_MODULES["raises"][0])
    out = evaltui(tmp_path, str(graph), "--verbose")
    assert out.returncode == 2
    assert "Traceback (most recent call last)" in out.stderr
    assert 'mine.py", line 3, in <module>' in out.stderr
    assert not (tmp_path / "outputs").exists()


def test_a_constructor_that_raises_is_one_line_and_its_traceback_is_in_run_log(
        tmp_path: Path) -> None:
    graph = write_graph(tmp_path, (
        "from evaltui.benchmarks.babyai.bot import BabyAIBotPolicy\n\n\n"
        "class Policy(BabyAIBotPolicy):\n"
        "    def __init__(self, noise: float = 0.0) -> None:\n"
        "        raise ValueError('my policy needs a checkpoint')\n"))
    out = evaltui(tmp_path, str(graph), "--episodes", "2")
    assert out.returncode == 1
    assert "Traceback" not in out.stderr + out.stdout
    [line] = [ln for ln in out.stderr.splitlines() if ln.startswith("error")]
    assert f"{tmp_path / 'mine.py'}:6: ValueError: my policy needs a checkpoint" in line
    assert "nodeset 'policy' (Policy) failed to build" in line
    assert "metric" not in out.stdout  # no empty metrics table
    [run_dir] = (tmp_path / "outputs" / "eval_runs").iterdir()
    log = (run_dir / "run.log").read_text()
    assert "Traceback (most recent call last)" in log and "needs a checkpoint" in log


class Strict:
    def __init__(self, path: str = "") -> None:
        json.loads(path)  # the library raises; the line to show is this one, not json's


def test_build_nodeset_names_the_users_line_not_the_library_s() -> None:
    import pickle

    from evaltui.engine.usererrors import NodesetConstructorError, build_nodeset

    with pytest.raises(NodesetConstructorError) as err:
        build_nodeset("policy", Strict, {"path": "{oops"})
    message = str(err.value)
    assert message.startswith("nodeset 'policy' (Strict) failed to build: ")
    assert f"{__file__}:" in message and "JSONDecodeError: Expecting property name" in message
    assert "Traceback (most recent call last)" in err.value.detail
    copy = pickle.loads(pickle.dumps(err.value))  # crosses processes (Ray) intact
    assert (str(copy), copy.detail) == (message, err.value.detail)


def test_a_shared_nodeset_whose_constructor_raises_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "from evaltui.benchmarks.babyai.model import BabyAIModelPolicy\n\n\n"
        "class Policy(BabyAIModelPolicy):\n"
        "    def __init__(self, weights: str | None = None) -> None:\n"
        "        raise RuntimeError('CUDA out of memory')\n")
    graph = builtin_graph("model")
    graph["nodesets"]["policy"]["impl"] = "mine:Policy"
    (tmp_path / "graph.json").write_text(json.dumps(graph))
    out = evaltui(tmp_path, "graph.json", "--episodes", "1")
    assert out.returncode == 1
    assert "Traceback" not in out.stderr + out.stdout
    [line] = [ln for ln in out.stderr.splitlines() if ln.startswith("error")]
    assert "host of nodeset 'policy' failed to start: nodeset 'mine:Policy' (Policy) failed " \
        f"to build: {tmp_path / 'mine.py'}:6: RuntimeError: CUDA out of memory" in line
