"""One name, one thing: no two classes of the package share a name (a reader meeting
``Admit`` should not have to ask which one)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "evaltui"

KNOWN: set[str] = set()  # names allowed to repeat: none


def test_no_two_classes_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(PACKAGE)))
    shared = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert set(shared) <= KNOWN, {n: p for n, p in shared.items() if n not in KNOWN}
    assert len(where) > 200  # the scan found the package
