"""``evaltui report``: what the site holds, and each bad input in one clear line.

The pages are checked as files here (numbers, notes, which pages exist); the browser
tests (test_report_browser.py) check that they work when opened.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from PIL import Image

from evaltui.cli import main
from evaltui.rundir.jsonfiles import read_json
from tests.engine.faulty_nodesets import write_dataset
from tests.engine.runhelpers import ENGINE_TESTS, running, wait_until

METRIC_ROW = re.compile(r'<tr data-metric="([^"]+)"><th scope="row">[^<]*</th>'
                        r'<td class="mean" data-value="([^"]+)">[^<]*</td>'
                        r'<td class="ci"(?: data-lo="([^"]+)" data-hi="([^"]+)")?>[^<]*</td>'
                        r'<td class="n">([^<]*)</td>')


def report(run_dir: Path, out: Path, *args: str) -> int:
    return main(["report", str(run_dir), "-o", str(out), *args])


def shown_metrics(index_html: str) -> dict[str, tuple[float, tuple[float, float] | None, int]]:
    found = {}
    for name, mean, lo, hi, n in METRIC_ROW.findall(index_html):
        found[name] = (float(mean), (float(lo), float(hi)) if lo else None, int(n))
    return found


def table_data(out: Path) -> dict:
    text = (out / "data" / "episodes.js").read_bytes()
    prefix = b"window.EVALTUI_EPISODES = "
    assert text.startswith(prefix) and text.rstrip().endswith(b";")
    return orjson.loads(text[len(prefix):].rstrip()[:-1])


def test_report_shows_the_summary_numbers_header_rows_and_pages(
        ok_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "site"
    assert report(ok_run, out) == 0
    assert "6 episode pages" in capsys.readouterr().out
    summary = read_json(ok_run / "summary.json")
    html = (out / "index.html").read_text()
    shown = shown_metrics(html)
    assert set(shown) == set(summary["metrics"])
    for name, (mean, ci, n) in shown.items():
        assert mean == summary["metrics"][name]
        assert ci == tuple(summary["metrics_ci95"][name])
        assert n == summary["metrics_n"][name]
    for key, value in [("graph", "babyai-bot"), ("dataset", "babyai"), ("split", "GoToLocal"),
                       ("workers", "2"), ("executor", "local"), ("episodes", "6 of 6")]:
        assert f'<div data-key="{key}"><dt>{key}</dt><dd>{value}</dd></div>' in html
    assert "errors count as failures" not in html
    data = table_data(out)
    assert [r[0] for r in data["rows"]] == [r["episode_index"] for r in summary["episodes"]]
    assert data["pages"] == list(range(6))
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing fetched
    for i, row in enumerate(summary["episodes"]):
        page = (out / "episodes" / f"ep{i:04d}.html").read_text()
        assert row["instruction"] in page and 'id="step-slider"' in page
        with Image.open(out / "episodes" / f"ep{i:04d}.frames.png") as sheet:
            sheet_size = sheet.size
        ep = orjson.loads((out / "episodes" / f"ep{i:04d}.js").read_bytes()
                          .split(b" = ", 1)[1].rstrip()[:-1])
        frames = ep["frames"]
        assert frames["count"] == row["step_count"] + 1  # reset, then one a step
        assert sheet_size[0] == frames["cols"] * frames["width"]
        assert ep["log"]["total"] == len(ep["log"]["records"]) > row["step_count"]
    svg = (out / "plots" / "running_means.svg").read_text()
    assert svg.startswith("<svg") and 'data-metric="success"' in svg


def test_errored_episodes_are_said_on_the_index_and_their_pages(
        errored_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert report(errored_run, out) == 0
    summary = read_json(errored_run / "summary.json")
    assert summary["error_count"] == 2
    html = (out / "index.html").read_text()
    assert "errors count as failures (2 of 6 episodes errored)" in html
    assert "<th>ok only</th>" in html
    assert shown_metrics(html)["success"][0] == summary["metrics"]["success"]
    page = (out / "episodes" / "ep0001.html").read_text()
    assert "policy crashed on GoToLocal-0001" in page
    assert "counts as a failure in the run's means" in page
    statuses = {r[0]: r[2] for r in table_data(out)["rows"]}
    assert statuses == {0: "ok", 1: "error", 2: "ok", 3: "ok", 4: "error", 5: "ok"}


def test_episodes_option_limits_the_pages_not_the_table(errored_run: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    out = tmp_path / "site"
    assert report(errored_run, out, "--episodes", "0,error") == 0
    assert sorted(p.name for p in (out / "episodes").glob("*.html")) == \
        ["ep0000.html", "ep0001.html", "ep0004.html"]
    data = table_data(out)
    assert data["pages"] == [0, 1, 4] and len(data["rows"]) == 6
    capsys.readouterr()
    assert report(errored_run, tmp_path / "bad", "--episodes", "0,bogus") == 2
    err = capsys.readouterr().err
    assert "--episodes: 'bogus' is not an index" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "bad").exists()


def test_an_output_dir_that_is_not_a_report_is_refused_unless_forced(
        ok_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    assert report(ok_run, out) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: {out} exists and is not an evaltui report "
                   "(no .evaltui-report); give --force to replace it")
    assert [p.name for p in out.iterdir()] == ["thesis.tex"]
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]  # no half-built sibling left
    assert report(ok_run, out, "--force") == 0
    assert (out / "index.html").is_file() and not (out / "thesis.tex").exists()
    (out / "index.html").write_text("stale")
    assert report(ok_run, out) == 0  # an earlier report is simply replaced
    assert (out / "index.html").read_text() != "stale"
    link = tmp_path / "link"
    link.symlink_to(out)
    assert report(ok_run, link, "--force") == 2
    assert "is a symlink" in capsys.readouterr().err
    assert report(ok_run, ok_run, "--force") == 2  # never over the run itself
    assert "would delete it" in capsys.readouterr().err
    assert (ok_run / "summary.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "mine"]  # no leftovers


def test_a_torn_summary_is_rebuilt_from_the_episodes_and_said(
        ok_run: Path, copy_run, tmp_path: Path) -> None:
    run = copy_run(ok_run)
    original = read_json(run / "summary.json")
    text = (run / "summary.json").read_bytes()
    (run / "summary.json").write_bytes(text[: len(text) // 2])
    out = tmp_path / "site"
    assert report(run, out) == 0
    html = (out / "index.html").read_text()
    assert "numbers recomputed from the episode rows" in html
    assert "summary.json: unreadable" in html
    for name, (mean, _ci, n) in shown_metrics(html).items():
        assert mean == pytest.approx(original["metrics"][name], abs=1e-12)
        assert n == original["metrics_n"][name]


def test_a_missing_frames_file_says_no_frames_on_that_page(
        ok_run: Path, copy_run, tmp_path: Path) -> None:
    run = copy_run(ok_run)
    (run / "episodes" / "ep0002" / "frames.bin").unlink()
    out = tmp_path / "site"
    assert report(run, out) == 0
    page = (out / "episodes" / "ep0002.html").read_text()
    assert 'id="no-frames"' in page and "no frames (" in page
    assert 'id="step-slider"' not in page
    assert not (out / "episodes" / "ep0002.frames.png").exists()
    assert 'id="step-slider"' in (out / "episodes" / "ep0003.html").read_text()


def test_a_run_still_running_is_said_and_its_finished_episodes_shown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ENGINE_TESTS))  # prepare_run imports the nodesets
    graph = {
        "name": "walk",
        "nodesets": {"env": {"impl": "faulty_nodesets:WalkEnv", "parallelism": "replicated",
                             "params": {"step_sleep_ms": 40}},
                     "policy": {"impl": "faulty_nodesets:StepPolicy", "parallelism": "inline"}},
        "nodes": {"policy": {"nodeset": "policy", "op": "act"},
                  "env_step": {"nodeset": "env", "op": "step"}},
        "edges": [["@obs", "policy.obs"], ["policy.action", "env_step.action"]],
        "loop": {"env": "env", "step": "env_step"}}
    dataset = write_dataset(tmp_path / "walk.jsonl", [5] * 40)
    spec = {"graph": graph, "active_workspace_dir": str(ENGINE_TESTS),
            "eval": {"dataset": str(dataset), "worker_count": 1}}
    with running(spec, tmp_path / "o") as (run_dir, _proc):
        wait_until(lambda: len(list(run_dir.glob("episodes/ep*/episode.json"))) >= 2,
                   what="two finished episodes")
        out = tmp_path / "site"
        assert report(run_dir, out, "--episodes", "none") == 0
    html = (out / "index.html").read_text()
    assert '<span id="run-state" class="state state-running">running</span>' in html
    match = re.search(r"run still running: (\d+) of 40 episodes finished so far", html)
    assert match, html
    finished = int(match.group(1))
    assert 2 <= finished < 40
    assert len(table_data(out)["rows"]) == finished
    assert shown_metrics(html)["success"][2] == finished


def test_not_a_run_dir_is_one_line_and_exit_2(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert report(tmp_path / "empty", tmp_path / "site") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "not a run dir" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "site").exists()


def test_the_report_assets_ship_with_the_package() -> None:
    import tomllib

    root = Path(__file__).resolve().parents[2]
    data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = data["package-data"]["evaltui"]
    for name in ("report.js", "report.css"):
        assert (root / "evaltui" / "report" / "assets" / name).is_file()
        assert f"report/assets/*{Path(name).suffix}" in patterns


def test_a_failed_run_says_why_on_the_index(tmp_path: Path) -> None:
    from evaltui.rundir.jsonfiles import touch_done
    from tests.results.resultruns import rows_a, write_run

    run = write_run(tmp_path / "20250101_120000", rows_a(), graph_name="bot",
                    summary_extra={"status": "failed",
                                   "error": "the graph could not load: no module 'x'"})
    touch_done(run)
    out = tmp_path / "site"
    assert report(run, out) == 0
    html = (out / "index.html").read_text()
    assert '<p class="note">run failed: the graph could not load: no module &#x27;x&#x27;</p>' \
        in html
    assert '<span id="run-state" class="state state-failed">failed</span>' in html
