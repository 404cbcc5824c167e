"""Built-in graphs shipped with evaltui, as JSON files (``evaltui eval bot``)."""

from __future__ import annotations

from pathlib import Path

GRAPHS_DIR = Path(__file__).parent


def builtin_graph_names() -> list[str]:
    return sorted(p.stem for p in GRAPHS_DIR.glob("*.json"))


def builtin_graph_path(name: str) -> Path | None:
    path = GRAPHS_DIR / f"{name}.json"
    return path if path.is_file() else None
