"""What a new user does next with a finished run, without a backend (issue 25): show and
verify it by run id, read its CSV at full precision, export a GIF one can see."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from botruns import finished_bot_run, nothing_listens_url
from PIL import Image

from evaltui.cli import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real 3-episode bot run (path lengths 2, 2 and 6: a mean of 2.333...)."""
    return finished_bot_run(tmp_path_factory, 3)


@pytest.fixture
def no_backend(monkeypatch: pytest.MonkeyPatch) -> str:
    url = nothing_listens_url()
    monkeypatch.setenv("BACKEND_URL", url)  # nothing listens there
    return url


def test_show_run_id_reads_the_outputs_root_when_no_backend_answers(
        run_dir: Path, no_backend: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("EVALTUI_OUTPUTS", str(run_dir.parents[1]))
    assert main(["show", run_dir.name]) == 0
    out = capsys.readouterr().out
    assert f"run {run_dir.name}: done" in out and "success" in out
    assert main(["show", run_dir.name, "--outputs", str(run_dir.parents[1]), "--json"]) == 0
    assert f'"run_id": "{run_dir.name}"' in capsys.readouterr().out


def test_verify_takes_a_run_id(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", run_dir.name, "--outputs", str(run_dir.parents[1])]) == 0
    assert f"verified 3 episodes of {run_dir}" in capsys.readouterr().out


def test_csv_keeps_every_digit_unless_digits_is_given(
        run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(run_dir), "--format", "csv"]) == 0
    rows = {r["metric"]: r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert rows["path_length"]["mean"] == repr(7 / 3)  # 2.3333333333333335, not 2.333
    assert rows["success"]["mean"] == "1.000"
    assert main(["show", str(run_dir), "--format", "csv", "--digits", "2"]) == 0
    rows = {r["metric"]: r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert rows["path_length"]["mean"] == "2.33"
    assert main(["show", str(run_dir), "--format", "md"]) == 0
    assert "| path_length | 2.333 |" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "suffix", "size"), [
    ([], ".gif", 256),  # GoToLocal frames are 64 px: scaled x4 by default
    (["--scale", "2"], ".gif", 128),
    ([], ".png", 256),  # an animated PNG
])
def test_export_scales_frames_and_writes_the_format_its_suffix_names(
        run_dir: Path, tmp_path: Path, extra: list[str], suffix: str, size: int) -> None:
    out = tmp_path / f"ep{suffix}"
    assert main(["replay", str(run_dir / "episodes" / "ep0000"), "--export", str(out),
                 *extra]) == 0
    with Image.open(out) as im:
        assert im.format == {".gif": "GIF", ".png": "PNG"}[suffix]
        assert im.size == (size, size)
        assert getattr(im, "n_frames", 1) > 1


def test_compare_fits_80_columns_but_the_run_dir_lines(
        run_dir: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["compare", str(run_dir), str(run_dir), "--resamples", "50"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # The A:/B: lines hold run dir paths, kept whole to be copied.
    assert [ln for ln in lines if len(ln) > 80 and not ln.startswith(("A: ", "B: "))] == []
    assert any("50 resamples, seed 0" in ln for ln in lines)
