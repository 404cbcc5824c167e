"""A new user's mistakes (issue 25, "Must hold"): each bad input is one line on stderr,
the documented exit code, no traceback, and nothing written under the outputs root.

Every row is a real ``python -m evaltui.cli`` subprocess, with the outputs root and the
state dir of the test; the rows that need an episode dir share one real 1-episode run.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from botruns import finished_bot_run, nothing_listens_url

GRAPHS = Path(__file__).resolve().parents[1] / "evaltui" / "graphs"


@dataclass(frozen=True)
class Place:
    """What a row's command line may refer to."""

    tmp: Path
    outputs: Path
    ep_dir: Path
    hung_url: str
    free_url: str


def graph_with_policy_module(place: Place, text: str) -> str:
    """A graph file whose policy is ``mine:Policy`` from a module holding ``text``."""
    (place.tmp / "mine.py").write_text(text)
    graph = json.loads((GRAPHS / "bot.json").read_text())
    graph["nodesets"]["policy"]["impl"] = "mine:Policy"
    path = place.tmp / "mine.json"
    path.write_text(json.dumps(graph))
    return str(path)


def a_file(place: Place) -> str:
    path = place.tmp / "a-file"
    path.write_text("not a dir")
    return str(path)


Args = Callable[[Place], list[str]]
# (id, argv built from the place, exit code, what stderr's one line says)
HOSTILE: list[tuple[str, Args, int, str]] = [
    ("noise-out-of-bounds", lambda p: ["eval", "bot", "--set", "policy.noise=5"], 2,
     "graph.nodesets.policy.params.noise: Input should be less than or equal to 1 (got 5; "
     "BabyAIBotPolicy expects float >= 0 and <= 1)"),
    ("noise-not-a-number", lambda p: ["eval", "bot", "--set", "policy.noise=abc"], 2,
     "graph.nodesets.policy.params.noise: Input should be a valid number"),
    ("tile-size-zero", lambda p: ["eval", "bot", "--set", "env.tile_size=0"], 2,
     "graph.nodesets.env.params.tile_size: Input should be greater than or equal to 1"),
    ("module-syntax-error", lambda p: ["eval", graph_with_policy_module(
        p, "import os\ndef act(:\n    pass\n")], 2, "mine.py:2: SyntaxError: invalid syntax"),
    ("module-raises-at-import", lambda p: ["eval", graph_with_policy_module(
        p, "raise RuntimeError('no GPU here')\n")], 2, "mine.py:1: RuntimeError: no GPU here"),
    ("module-missing-class", lambda p: ["eval", graph_with_policy_module(p, "x = 1\n")], 2,
     "module 'mine' has no attribute 'Policy'"),
    ("outputs-is-a-file", lambda p: ["eval", "bot", "--outputs", a_file(p)], 2,
     "a-file: not a directory"),
    ("outputs-unwritable", lambda p: ["eval", "bot", "--outputs", "/proc/evaltui-outputs"], 2,
     "outputs /proc/evaltui-outputs: cannot create it"),
    ("duplicate-indices", lambda p: ["eval", "bot", "--indices", "0,0,0"], 2,
     "eval.episode_indices: 0 given more than once"),
    # Missing places are under the test's dir: a regression must not write outside it.
    ("workspace-missing", lambda p: ["eval", "bot", "--workspace", str(p.tmp / "missing")],
     2, "missing: no such directory"),
    ("eval-a-directory", lambda p: ["eval", str(p.tmp)], 2,
     "is a directory: give a graph or JobSpec JSON file, or a built-in graph name"),
    ("negative-episodes", lambda p: ["eval", "bot", "--episodes", "-3"], 2,
     "eval.episode_count"),
    ("unknown-graph", lambda p: ["eval", "no_such_graph"], 2, "no built-in graph"),
    ("serve-port-too-big", lambda p: ["serve", "--port", "99999"], 2,
     "--port must be 0-65535 (0 picks a free one), got 99999"),
    ("serve-port-negative", lambda p: ["serve", "--port", "-1"], 2, "got -1"),
    ("serve-outputs-is-a-file", lambda p: ["serve", "--port", "0", "--outputs", a_file(p)],
     2, "a-file: not a directory"),
    ("tui-outputs-is-a-file", lambda p: ["--outputs", a_file(p)], 2,
     "a-file: not a directory"),
    ("tui-api-port-too-big", lambda p: ["--api-port", "70000"], 2,
     "--api-port must be 0-65535 (0: no API), got 70000"),
    ("export-missing-parent", lambda p: ["replay", str(p.ep_dir), "--export",
                                         str(p.tmp / "missing" / "dir" / "x.gif")], 2,
     "missing/dir: no such directory"),
    ("export-unknown-suffix", lambda p: ["replay", str(p.ep_dir), "--export",
                                         str(p.tmp / "x.txt")], 2, "unknown suffix '.txt'"),
    ("export-scale-zero", lambda p: ["replay", str(p.ep_dir), "--export",
                                     str(p.tmp / "x.gif"), "--scale", "0"], 2,
     "--scale must be >= 1"),
    ("verify-unknown-run-id", lambda p: ["verify", "20991231_000000"], 2,
     "no run 20991231_000000 under"),
    # an id that is no run here and no backend to ask: an unknown id, as everywhere (2)
    ("show-unknown-run-no-backend", lambda p: ["show", "20991231_000000", "--url",
                                               p.free_url], 2, "no backend at"),
    ("ls-backend-never-answers", lambda p: ["ls", "--url", p.hung_url], 1,
     "took the connection but did not answer within 3 s"),
    ("unknown-split", lambda p: ["eval", "bot", "--split", "Nope"], 2,
     "eval.split: unknown split 'Nope'"),
    ("dataset-missing", lambda p: ["eval", "bot", "--dataset", "/nonexistent.jsonl"], 2,
     "eval.dataset: no such file: /nonexistent.jsonl"),
    ("set-without-value", lambda p: ["eval", "bot", "--set", "policy"], 2,
     "--set 'policy' must look like nodeset.param=value"),
    ("replay-not-an-episode-dir", lambda p: ["replay", str(p.tmp)], 2,
     "is not an episode dir"),
    ("compare-missing-run", lambda p: ["compare", "/nonexistent", str(p.ep_dir.parents[1])],
     2, "'/nonexistent' is neither a run dir nor a run id"),
    ("verify-missing-dir", lambda p: ["verify", "/nonexistent"], 2, "not a run dir"),
    ("logs-no-backend", lambda p: ["logs", "20991231_000000", "0", "--url", p.free_url], 1,
     "no backend at"),
]


@pytest.fixture(scope="module")
def ep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real BabyAI episode with frames, in an outputs root of its own."""
    return finished_bot_run(tmp_path_factory, 1, "episode-outputs") / "episodes" / "ep0000"


@pytest.fixture(scope="module")
def hung_url() -> Iterator[str]:
    """A socket that takes connections (its backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize(("args", "code", "says"), [row[1:] for row in HOSTILE],
                         ids=[row[0] for row in HOSTILE])
def test_a_hostile_input_is_one_line_its_exit_code_and_nothing_written(
        args: Args, code: int, says: str, tmp_path: Path, ep_dir: Path, hung_url: str) -> None:
    place = Place(tmp=tmp_path, outputs=tmp_path / "outputs", ep_dir=ep_dir,
                  hung_url=hung_url, free_url=nothing_listens_url())
    argv = args(place)
    before = {p.name for p in tmp_path.iterdir()}
    env = {**os.environ, "EVALTUI_OUTPUTS": str(place.outputs), "COLUMNS": "80"}
    env.pop("BACKEND_URL", None)
    proc = subprocess.run([sys.executable, "-m", "evaltui.cli", *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    err = proc.stderr.strip()
    assert proc.returncode == code, proc.stderr
    assert err.count("\n") == 0, f"more than one line on stderr:\n{proc.stderr}"
    assert says in err
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not place.outputs.exists()
    assert {p.name for p in tmp_path.iterdir()} == before  # no GIF, no dir, nothing else
