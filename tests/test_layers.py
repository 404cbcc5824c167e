"""The layers hold statically: ``lint-imports`` checks pyproject's import-linter contracts
(contract < engine < scheduler < api < tui / commands) over every module, including the
imports a run never reaches, which tests/test_import_hygiene.py cannot see."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_linter_contracts_are_kept() -> None:
    lint = shutil.which("lint-imports")
    if lint is None:
        pytest.skip("import-linter is not installed (it is in the test extra)")
    done = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout
