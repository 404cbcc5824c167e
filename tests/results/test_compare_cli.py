"""``evaltui compare`` as a user runs it: exit codes, messages, --json, --format, end to end."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import resultruns as rr

from evaltui.cli import main


def _cli(*args: str, cwd: Path | None = None, timeout: float = 60
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaltui.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def test_json_document_is_complete_and_stable(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    a, b = rr.write_pair(tmp_path)
    assert main(["compare", str(a), str(b), "--json", "--resamples", "500"]) == 0
    first = capsys.readouterr().out
    # The same runs by run id under --outputs: the very same document.
    assert main(["compare", a.name, b.name, "--outputs", str(tmp_path), "--json",
                 "--resamples", "500"]) == 0
    assert capsys.readouterr().out == first
    doc = json.loads(first)
    assert list(doc) == ["run_a", "run_b", "n_pairs", "dropped", "bootstrap", "metrics",
                         "mcnemar", "flips"]
    assert doc["run_a"] == {"run_id": a.name, "run_dir": str(a.resolve()), "graph_name": "bot",
                            "dataset": "babyai", "split": "GoToLocal"}
    assert doc["n_pairs"] == 12
    assert doc["bootstrap"] == {"method": "paired percentile", "level": 0.95,
                                "resamples": 500, "seed": 0}
    assert doc["mcnemar"] == {"b": 1, "c": 7, "n": 12, "p_value": 0.0703125}
    assert doc["flips"]["lost"] == [{"episode_id": "GoToLocal-0007", "index_a": 7,
                                     "index_b": 7}]
    assert [f["index_a"] for f in doc["flips"]["gained"]] == list(range(7))
    assert [m["name"] for m in doc["metrics"]] == ["success", "spl", "ndtw", "sdtw",
                                                   "path_length", "nav_error"]
    assert doc["metrics"][0]["diff"] == pytest.approx(6 / 12)
    assert doc["dropped"] == {"only_a": 0, "only_b": 0, "only_a_ids": [], "only_b_ids": []}


def test_human_output_names_runs_flips_and_the_bootstrap(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = rr.write_pair(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")  # rich's width when stdout is not a terminal
    assert main(["compare", str(a), str(b), "--resamples", "100", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "A: 20250101_120000 (bot)" in out and "B: 20250101_130000 (model)" in out
    assert "100 resamples, seed 3" in out
    assert "b = 1 (A ok, B fail), c = 7 (A fail, B ok), p = 0.07031" in out
    assert "A success -> B failure (1):\n  GoToLocal-0007  ep 7" in out
    assert "A failure -> B success (7):" in out


def test_mismatched_sets_exit_2_with_one_line_and_intersect_compares(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows_b = rr.rows_b()[:9] + rr.rows_b()[12:]  # B lacks episodes 9, 10, 11
    a = rr.write_run(tmp_path / "20250101_120000", rr.rows_a(), graph_name="bot")
    b = rr.write_run(tmp_path / "20250101_130000", rows_b, graph_name="model")
    proc = _cli("compare", str(a), str(b))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == ("error: episode sets differ: 3 only in A "
                           "(GoToLocal-0009, GoToLocal-0010, GoToLocal-0011); 9 shared "
                           "(--intersect compares the 9 shared episodes)\n")
    assert main(["compare", str(a), str(b), "--intersect", "--json", "--resamples", "50"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["n_pairs"] == 9
    assert doc["dropped"]["only_a_ids"] == ["GoToLocal-0009", "GoToLocal-0010",
                                            "GoToLocal-0011"]
    assert doc["mcnemar"]["b"] == 1 and doc["mcnemar"]["c"] == 7


@pytest.mark.parametrize("args, message", [
    (["20250101_140000"], "no run 20250101_140000 under"),
    (["nowhere"], "'nowhere' is neither a run dir nor a run id"),
])
def test_bad_run_references_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   args: list[str], message: str) -> None:
    a, _ = rr.write_pair(tmp_path)
    assert main(["compare", str(a), *args, "--outputs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
    assert err.count("\n") == 1


def test_duplicate_episode_id_exits_2(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    rows = rr.rows_b()
    rows[5]["episode_id"] = rows[4]["episode_id"]
    a = rr.write_run(tmp_path / "a", rr.rows_a(), graph_name="bot")
    b = rr.write_run(tmp_path / "b", rows, graph_name="model")
    assert main(["compare", str(a), str(b)]) == 2
    assert "run B: episode_id GoToLocal-0004 appears more than once" in capsys.readouterr().err


def test_format_prints_only_the_table(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    a, b = rr.write_pair(tmp_path)
    assert main(["compare", str(a), str(b), "--format", "csv", "--resamples", "50"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["metric"] for r in rows][:2] == ["success", "spl"]
    assert rows[0]["mean_a"] == "0.250" and rows[0]["mean_b"] == "0.750"
    assert main(["compare", str(a), str(b), "--format", "latex", "--digits", "2",
                 "--resamples", "50"]) == 0
    tex = capsys.readouterr().out
    assert tex.startswith("\\begin{tabular}") and "\\toprule" in tex
    assert "success & 0.25 & 0.75 & 0.50 &" in tex


@pytest.mark.parametrize("extra", [["--resamples", "0"], ["--seed", "-1"],
                                   ["--json", "--format", "md"], ["--format", "html"]])
def test_usage_errors_exit_2(tmp_path: Path, extra: list[str]) -> None:
    a, b = rr.write_pair(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["compare", str(a), str(b), *extra])
    assert info.value.code == 2


def test_end_to_end_bot_against_noisy_bot(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    for graph in ("bot", "noisy_bot"):
        proc = _cli("eval", graph, "--split", "GoToLocal", "--episodes", "6", "--outputs",
                    str(outputs), cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, proc.stderr
    run_a, run_b = sorted(outputs.glob("eval_runs/*"))  # run ids sort by start time
    proc = _cli("compare", run_a.name, run_b.name, "--outputs", str(outputs), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["n_pairs"] == 6
    assert doc["run_a"]["graph_name"] == "babyai-bot"
    assert doc["run_b"]["graph_name"] == "babyai-noisy-bot"
    success = doc["metrics"][0]
    assert success["name"] == "success" and success["n"] == 6
    flips = doc["flips"]
    assert doc["mcnemar"]["b"] == len(flips["lost"]) and doc["mcnemar"]["c"] == \
        len(flips["gained"])
    assert success["diff"] == pytest.approx((len(flips["gained"]) - len(flips["lost"])) / 6)
