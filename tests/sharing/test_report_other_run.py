"""``report`` into a directory holding another run's report (issue 35, item 13): refused
in one line, exit 2, the other report kept; the same run's report is replaced, and
``--force`` replaces another's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from botruns import finished_bot_run

from evaltui.cli import main
from evaltui.report.outdir import MARKER


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return (finished_bot_run(tmp_path_factory, 1, "first"),
            finished_bot_run(tmp_path_factory, 1, "second"))


def test_another_runs_report_is_not_silently_replaced(
        two_runs: tuple[Path, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    a, b = two_runs
    site = tmp_path / "site"
    assert main(["report", str(a), "-o", str(site)]) == 0
    assert json.loads((site / MARKER).read_text())["of"] == f"run {a.name}"
    capsys.readouterr()
    assert main(["report", str(b), "-o", str(site)]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {site.absolute()} holds the report of run {a.name}, not run "
                   f"{b.name}; give another -o, or --force to replace it\n")
    assert json.loads((site / MARKER).read_text())["of"] == f"run {a.name}"
    assert main(["report", str(a), "-o", str(site)]) == 0  # the same run: replaced
    assert main(["report", str(b), "-o", str(site), "--force"]) == 0
    assert json.loads((site / MARKER).read_text())["of"] == f"run {b.name}"
