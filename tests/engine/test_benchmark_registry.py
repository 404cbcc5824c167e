"""The benchmark registry: built-in datasets resolve without the engine importing any
benchmark, and a third party's benchmark plugs in through the entry point group."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from evaltui.engine.graph import benchmarks
from evaltui.engine.graph.datasets import DatasetError, builtin_splits, resolve_dataset

ENGINE = Path(__file__).resolve().parents[2] / "evaltui" / "engine"


def test_the_engine_imports_no_benchmark() -> None:
    for path in ENGINE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.startswith("evaltui.benchmarks") for n in names), path


def test_builtin_benchmarks_resolve_their_splits() -> None:
    assert benchmarks.benchmark_names()[:2] == ["babyai", "metaworld"]
    path, split = resolve_dataset("metaworld", None)
    assert split == "MT10" and path.name == "MT10.jsonl"
    assert "reach-v3" in builtin_splits("metaworld") and "GoTo" in builtin_splits("babyai")
    with pytest.raises(DatasetError, match="unknown split 'MT3'"):
        resolve_dataset("metaworld", "MT3")
    assert benchmarks.default_group_by("metaworld") == "task"
    assert benchmarks.default_group_by("babyai") is None


def test_a_third_party_benchmark_registers_through_its_entry_point(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "toybench.py").write_text(
        "from pathlib import Path\n"
        "from evaltui.engine.graph.benchmarks import Benchmark\n"
        "HERE = Path(__file__).parent\n"
        "BENCHMARK = Benchmark('toy', {'easy': lambda: HERE / 'easy.jsonl'}, 'easy', 'level')\n")
    (tmp_path / "easy.jsonl").write_text(json.dumps({"episode_id": "e0", "level": 1}) + "\n")
    dist = tmp_path / "toybench-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toybench\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[evaltui.benchmarks]\ntoy = toybench\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    benchmarks._registry.cache_clear()
    try:
        assert resolve_dataset("toy", None) == (tmp_path / "easy.jsonl", "easy")
        assert benchmarks.default_group_by("toy") == "level"
    finally:
        sys.modules.pop("toybench", None)
        benchmarks._registry.cache_clear()
