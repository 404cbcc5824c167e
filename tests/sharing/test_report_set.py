"""``evaltui report SET_DIR``: the set's table (numbers = the members' summary.json, the
best marked, the baseline differences = ``set show --baseline``'s), the pivot, the plot
over checkpoints as SVG, and each member's own report linked below the site."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evaltui.cli import main
from evaltui.rundir.jsonfiles import read_json

CELL = re.compile(r'<td class="mean( best)?" data-metric="([^"]+)" data-value="([^"]+)"'
                  r' data-lo="([^"]+)" data-hi="([^"]+)">')


@pytest.fixture(scope="module")
def set_site(real_set: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("set_report") / "site"
    assert main(["report", str(real_set), "-o", str(out), "--pivot", "split",
                 "--episodes", "0-1"]) == 0
    return out


def member_rows(index: str) -> dict[str, str]:
    return dict(re.findall(r'<tr data-key="([0-9a-f]+)">(.*?)</tr>',
                           index.split('id="set-members"')[1].split("</table>")[0]))


def test_the_set_page_has_the_members_numbers_and_links(set_site: Path, real_set: Path
                                                        ) -> None:
    record = read_json(real_set / "set.json")
    index = (set_site / "index.html").read_text()
    rows = member_rows(index)
    assert set(rows) == {m["key"] for m in record["members"]}
    best = {}
    for m in record["members"]:
        summary = read_json(Path(m["run_dir"]) / "summary.json")
        cells = {name: (float(v), float(lo), float(hi), bool(b))
                 for b, name, v, lo, hi in CELL.findall(rows[m["key"]])}
        assert set(cells) == set(summary["metrics"])
        for name, (mean, lo, hi, is_best) in cells.items():
            assert mean == summary["metrics"][name]
            assert [lo, hi] == summary["metrics_ci95"][name]
            if is_best:
                best.setdefault(name, []).append(m["key"])
        link = f'runs/{m["run_id"]}/index.html'
        assert link in rows[m["key"]]
        member_page = (set_site / link).read_text()
        assert f"Run {m['run_id']}" in member_page
        assert '../../assets/report.css' in member_page  # the site's one stylesheet
        assert sorted(p.name for p in (set_site / "runs" / m["run_id"] / "episodes")
                      .glob("ep*.html")) == ["ep0000.html", "ep0001.html"]
    success = {m["key"]: read_json(Path(m["run_dir"]) / "summary.json")["metrics"]["success"]
               for m in record["members"]}
    top = max(success.values())
    assert sorted(best["success"]) == sorted(k for k, v in success.items() if v == top)


def test_the_set_page_compares_with_the_baseline_as_set_show_does(
        set_site: Path, real_set: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["set", "show", str(real_set), "--baseline", "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    index = (set_site / "index.html").read_text()
    part = index.split('id="set-baseline"')[1].split("</table>")[0]
    rows = dict(re.findall(r'<tr data-key="([0-9a-f]+)">(.*?)</tr>', part))
    compared = 0
    for member in shown["members"]:
        vs = member.get("vs_baseline") or {}
        if member["key"] == shown["baseline"]["key"]:
            assert ">baseline<" in rows[member["key"]]
        elif "metrics" in vs:
            diffs = dict(re.findall(r'data-metric="([^"]+)" data-value="([^"]+)"',
                                    rows[member["key"]]))
            assert float(diffs["success"]) == vs["metrics"]["success"]["diff"]
            holm = re.search(r'class="p-holm" data-value="([^"]*)"', rows[member["key"]])
            assert holm and float(holm.group(1)) == vs["mcnemar_p_holm"]
            compared += 1
    assert compared >= 1
    pivot = index.split('id="set-pivot"')[1].split("</table>")[0]
    assert "success (split=GoToLocal)" in pivot and "success (split=GoToObjMaze)" in pivot


def test_the_plot_over_checkpoints_is_an_svg_of_the_members_means(set_site: Path,
                                                                  real_set: Path) -> None:
    svg = (set_site / "plots" / "success_over_steps.svg").read_text()
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert 'src="plots/success_over_steps.svg"' in (set_site / "index.html").read_text()
    points = re.findall(r'data-step="([^"]+)" data-value="([^"]+)"', svg)
    expected = []
    for m in read_json(real_set / "set.json")["members"]:
        summary = read_json(Path(m["run_dir"]) / "summary.json")
        expected.append((float(m["axes"]["step"]), summary["metrics"]["success"]))
    assert sorted((float(s), float(v)) for s, v in points) == sorted(expected)
    assert len(re.findall(r'class="curve"', svg)) == 2  # a line per split


def test_bad_set_report_inputs_are_one_line_and_write_nothing(
        real_set: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "site"
    assert main(["report", str(real_set), "-o", str(out), "--pivot", "colour"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --pivot colour: the set has no axis") \
        and "\n" not in err
    assert not out.exists()
    assert main(["report", str(real_set), "-o", str(real_set.parents[1])]) == 2
    assert "would delete it" in capsys.readouterr().err
