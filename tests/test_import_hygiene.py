"""Imports point down: each headless module, imported alone in a fresh interpreter, loads
nothing of the layers above it (harlequin's import-hygiene test, DESIGN's two layers).

The modules are found on disk, not by importing their packages, so a new module is
checked as soon as it exists.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UI = ("textual", "fastapi")

# package or module -> what importing it (or any module in it) must not load
RULES: dict[str, tuple[str, ...]] = {
    # The contract: the models every layer shares, importing no other evaltui package
    "evaltui.contract": ("evaltui.rundir", "evaltui.engine", "evaltui.scheduler", "evaltui.api",
                         "evaltui.tui", *UI),
    "evaltui.engine": ("evaltui.scheduler", "evaltui.tui", "evaltui.api", *UI),
    "evaltui.scheduler": ("evaltui.tui", *UI),
    "evaltui.api.client": ("evaltui.scheduler", "evaltui.tui", *UI),
    "evaltui.runview": ("evaltui.scheduler", "evaltui.api", "textual"),
    "evaltui.wrapper": ("evaltui.scheduler", "evaltui.tui", *UI),
    # Slurm's client commands only: the contract may carry its options model
    "evaltui.slurm": ("evaltui.engine", "evaltui.scheduler", "evaltui.api", "evaltui.tui", *UI),
    "evaltui.gpu": ("evaltui.scheduler", "evaltui.tui", "evaltui.api", *UI),
    "evaltui.sets": ("evaltui.tui", *UI),
    # The pure admission decision is read (and tested) without the scheduler around it.
    "evaltui.scheduler.admission.decision": (
        "evaltui.scheduler.scheduler", "evaltui.scheduler.core", "evaltui.scheduler.runs",
        "evaltui.scheduler.shared", "evaltui.scheduler.admits", "evaltui.tui", "evaltui.api",
        *UI),
    # The report and what every export reads (the trackers' modules need their extras).
    "evaltui.report": ("evaltui.scheduler", "evaltui.api", "evaltui.tui", *UI),
    "evaltui.runview.snapshot": ("evaltui.scheduler", "evaltui.api", "evaltui.tui", *UI),
    "evaltui.export.payload": ("evaltui.scheduler", "evaltui.api", "evaltui.tui", *UI),
}

# Known violations in code other people are reshaping right now (issue 14, item 4);
# strict, so the day they are fixed the marker has to go.
KNOWN: dict[str, str] = {}


def modules(name: str) -> list[str]:
    """``name`` itself if it is a module, else every module of the package on disk."""
    path = ROOT.joinpath(*name.split("."))
    if path.with_suffix(".py").is_file():
        return [name]
    found = []
    for file in sorted(path.rglob("*.py")):
        parts = file.relative_to(ROOT).with_suffix("").parts
        found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


CASES = [(module, banned) for name, banned in RULES.items() for module in modules(name)]


def loaded_by(module: str) -> set[str]:
    """The modules in sys.modules after importing ``module`` alone in a new interpreter."""
    code = (f"import json, sys; import {module}; "
            "json.dump(sorted(sys.modules), sys.stdout)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout))


@pytest.mark.parametrize(("module", "banned"), [
    pytest.param(m, b, marks=[pytest.mark.xfail(strict=True, reason=KNOWN[m])] if m in KNOWN
                 else []) for m, b in CASES], ids=[m for m, _ in CASES])
def test_headless_module_loads_nothing_above_it(module: str, banned: tuple[str, ...]) -> None:
    loaded = loaded_by(module)
    bad = sorted(m for m in loaded if any(m == b or m.startswith(b + ".") for b in banned))
    assert not bad, f"importing {module} loads {bad}"


def test_the_rules_cover_real_modules() -> None:
    """A renamed package must not silently empty the check."""
    for name in RULES:
        assert modules(name), name
    assert len(CASES) > 40
    assert set(KNOWN) <= {m for m, _ in CASES}


def test_the_scheduler_package_imports_nothing() -> None:
    """``import evaltui.scheduler`` (done by every import of one of its parts) loads no
    part of it: the façade lives in ``evaltui.scheduler.scheduler``."""
    loaded = {m for m in loaded_by("evaltui.scheduler") if m.startswith("evaltui")}
    assert loaded == {"evaltui", "evaltui.scheduler"}
