"""What a run ran on, in a title (issue 35, item 13): an own env's JSONL dataset read
``cliff-safe-path on <dir>/cliff.jsonl/cliff``."""

from __future__ import annotations

import io

from rich.console import Console

from evaltui.contract.views import data_label
from evaltui.results.tables import metrics_table


def test_an_own_jsonl_dataset_is_named_by_its_file() -> None:
    assert data_label("/home/u/envs/cliff.jsonl", "cliff") == "cliff.jsonl"
    assert data_label("/home/u/envs/cliff.jsonl", "hard") == "cliff.jsonl (hard)"
    assert data_label("babyai", "GoToLocal") == "babyai/GoToLocal"
    assert data_label(None, None) == "?"


def test_the_results_table_title_of_an_own_env_run() -> None:
    summary = {"graph_name": "cliff-safe-path", "dataset": "/tmp/x/cliff.jsonl",
               "split": "cliff", "metrics": {"success": 1.0}, "metrics_ci95": {},
               "metrics_n": {"success": 3}}
    console = Console(file=io.StringIO(), width=100, record=True)
    console.print(metrics_table(summary))
    text = console.export_text()
    assert "cliff-safe-path on cliff.jsonl" in text and "cliff.jsonl/cliff" not in text
