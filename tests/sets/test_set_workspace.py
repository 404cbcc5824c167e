"""A set whose graph's nodesets live in its workspace (``base.workspace``): the check
before anything is written imports them from there, as the run itself does."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from evaltui.graphs import builtin_graph_path
from evaltui.sets.plan import plan_file


def test_the_check_imports_nodesets_from_the_set_workspace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "ws_only_policy.py").write_text(
        "from evaltui.benchmarks.babyai.bot import BabyAIBotPolicy as WsBot  # noqa: F401\n")
    graph = json.loads(builtin_graph_path("bot").read_text())
    graph["nodesets"]["policy"]["impl"] = "ws_only_policy:WsBot"
    (tmp_path / "g.json").write_text(json.dumps(graph))
    (tmp_path / "s.json").write_text(json.dumps({
        "name": "ws", "base": {"graph": "g.json", "dataset": "babyai", "split": "GoToLocal",
                               "episodes": 1, "workspace": "ws"},
        "matrix": {"policy.noise": [0.0, 0.1]}}))
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(workspace)])
    plan = plan_file(tmp_path / "s.json", tmp_path / "out")  # refused before the fix
    assert len(plan.expansion.members) == 2
