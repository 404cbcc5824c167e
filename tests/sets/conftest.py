"""Set test fixtures: set files in tmp_path, the CLI in-process, runs killed at teardown."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from proctools import kill_runs  # noqa: E402


@pytest.fixture
def outputs(isolated_dirs: dict[str, Path]) -> Iterator[Path]:
    """The outputs root of the test; every run still alive under it is killed after."""
    yield isolated_dirs["outputs"]
    kill_runs(isolated_dirs["outputs"])


@pytest.fixture
def set_file(tmp_path: Path) -> Callable[..., Path]:
    """Write a set file (YAML) into tmp_path and return its path."""

    def write(data: dict[str, Any], name: str = "set.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


@pytest.fixture
def unbounded_bot_graph(tmp_path: Path) -> dict[str, Any]:
    """``base`` options naming the bot graph with :class:`unbounded_bot.UnboundedBot` as its
    policy (no declared bounds, so ``policy.noise=1.5`` fails at run time, not at check)."""
    from evaltui.graphs import builtin_graph_path

    graph = json.loads(builtin_graph_path("bot").read_text())
    graph["nodesets"]["policy"]["impl"] = "unbounded_bot:UnboundedBot"
    path = tmp_path / "unbounded_bot.json"
    path.write_text(json.dumps(graph))
    return {"graph": str(path), "workspace": str(Path(__file__).resolve().parent)}
