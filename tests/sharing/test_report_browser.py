"""The report in a real browser: Debian's chromium, headless, driven by selenium.

One browser for the module. The pages are opened from ``file://``, as a teammate opens a
copied report: with no console error, the numbers of summary.json, a table that sorts
and filters, a slider that changes the frame, and nothing loaded from outside the copy.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from chromium_driver import chromium, console_problems, file_url, missing

from evaltui.cli import main
from evaltui.engine.episode.metrics import aggregate
from evaltui.rundir.jsonfiles import read_json, touch_done, write_json_atomic

pytestmark = pytest.mark.browser
if missing() is not None:
    pytest.skip(str(missing()), allow_module_level=True)  # one line for the whole module


@pytest.fixture(scope="module")
def driver() -> Any:
    with chromium() as d:
        yield d


@pytest.fixture(scope="module")
def sites(ok_run: Path, errored_run: Path, tmp_path_factory: pytest.TempPathFactory
          ) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("sites")
    assert main(["report", str(ok_run), "-o", str(base / "ok")]) == 0
    assert main(["report", str(errored_run), "-o", str(base / "errored")]) == 0
    return {"ok": base / "ok", "errored": base / "errored"}


def open_page(driver: Any, path: Path) -> None:
    driver.get(file_url(path))
    problems = console_problems(driver)
    assert problems == [], problems


def by_css(driver: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, css)


def row_indices(driver: Any) -> list[int]:
    return [int(tr.get_attribute("data-index")) for tr in by_css(driver, "#episodes tbody tr")]


def test_index_loads_clean_and_shows_summary_numbers(driver: Any, sites: dict[str, Path],
                                                     errored_run: Path) -> None:
    open_page(driver, sites["errored"] / "index.html")
    summary = read_json(errored_run / "summary.json")
    shown = {}
    for tr in by_css(driver, "#metrics tbody tr"):
        name = tr.get_attribute("data-metric")
        mean = tr.find_element("css selector", "td.mean")
        shown[name] = (float(mean.get_attribute("data-value")), mean.text,
                       tr.find_element("css selector", "td.n").text)
    assert set(shown) == set(summary["metrics"])
    for name, (exact, text, n) in shown.items():
        assert exact == summary["metrics"][name]
        assert text == f"{summary['metrics'][name]:.4f}"
        assert n == str(summary["metrics_n"][name])
    notes = [p.text for p in by_css(driver, "#notes .note")]
    assert "errors count as failures (2 of 6 episodes errored)" in notes
    assert row_indices(driver) == list(range(6))
    assert by_css(driver, "#shown-count")[0].text == "showing 1-6 of 6 episodes"


def test_table_sorts_filters_and_searches(driver: Any, sites: dict[str, Path],
                                          errored_run: Path) -> None:
    from selenium.webdriver.support.ui import Select

    open_page(driver, sites["errored"] / "index.html")
    rows = read_json(errored_run / "summary.json")["episodes"]
    steps = by_css(driver, '#episodes th[data-key="step_count"]')[0]
    steps.click()
    want = sorted(rows, key=lambda r: (r["step_count"], r["episode_index"]))
    assert row_indices(driver) == [r["episode_index"] for r in want]
    assert steps.get_attribute("aria-sort") == "ascending"
    steps.click()
    assert steps.get_attribute("aria-sort") == "descending"
    want = sorted(rows, key=lambda r: (-r["step_count"], r["episode_index"]))
    assert row_indices(driver) == [r["episode_index"] for r in want]

    Select(by_css(driver, "#status-filter")[0]).select_by_value("error")
    assert sorted(row_indices(driver)) == [1, 4]
    assert {tr.get_attribute("data-status") for tr in by_css(driver, "#episodes tbody tr")} \
        == {"error"}
    Select(by_css(driver, "#status-filter")[0]).select_by_value("")
    search = by_css(driver, "#search")[0]
    search.send_keys("GoToLocal-0003")
    assert row_indices(driver) == [3]
    search.clear()
    instruction = rows[5]["instruction"]
    search.send_keys(instruction.upper())  # case-insensitive
    assert 5 in row_indices(driver)
    assert all(instruction in r["instruction"]
               for r in rows if r["episode_index"] in row_indices(driver))
    link = by_css(driver, '#episodes tbody tr[data-index="5"] a')[0]
    assert link.get_attribute("href").endswith("/episodes/ep0005.html")


def test_episode_slider_and_play_change_the_frame(driver: Any, sites: dict[str, Path],
                                                  ok_run: Path) -> None:
    from selenium.webdriver.common.keys import Keys

    open_page(driver, sites["ok"] / "episodes" / "ep0000.html")
    row = read_json(ok_run / "episodes" / "ep0000" / "episode.json")
    frame, slider = by_css(driver, "#frame")[0], by_css(driver, "#step-slider")[0]
    label = by_css(driver, "#frame-label")[0]
    count = row["step_count"] + 1
    assert label.text == f"step 0 · frame 1 of {count}"
    before = frame.screenshot_as_png
    slider.send_keys(Keys.END)
    assert frame.get_attribute("data-frame") == str(count - 1)
    assert label.text == f"step {row['step_count']} · frame {count} of {count}"
    assert frame.screenshot_as_png != before  # the picture itself changed
    slider.send_keys(Keys.HOME)
    assert frame.get_attribute("data-frame") == "0"
    by_css(driver, "#play")[0].click()
    deadline = time.monotonic() + 5
    while frame.get_attribute("data-frame") == "0" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert frame.get_attribute("data-frame") != "0", "play did not advance the frame"
    by_css(driver, "#play")[0].click()
    metrics = {tr.get_attribute("data-metric"):
               float(tr.find_element("css selector", "td").get_attribute("data-value"))
               for tr in by_css(driver, "#episode-metrics tr")}
    assert metrics == row["metrics"]
    log_rows = by_css(driver, "#log-table tbody tr")
    assert 0 < len(log_rows) <= 50
    assert log_rows[0].find_element("css selector", 'td[data-col="event"]').text == \
        "episode_start"


def test_a_long_firing_log_is_paged(driver: Any, ok_run: Path, copy_run, tmp_path: Path
                                    ) -> None:
    run = copy_run(ok_run)
    log = run / "episodes" / "ep0000" / "log.jsonl"
    lines = log.read_text().splitlines()
    extra = [json.dumps({"t": 0.0, "step": 99, "node": "policy", "nodeset": "policy",
                         "event": "fire", "dur_ms": 0.1, "inputs": {}, "outputs": {"k": k},
                         "error": None}) for k in range(120)]
    log.write_text("\n".join(lines + extra) + "\n")
    assert main(["report", str(run), "-o", str(tmp_path / "site"), "--episodes", "0"]) == 0
    open_page(driver, tmp_path / "site" / "episodes" / "ep0000.html")
    total = len(lines) + 120

    def first_line() -> str:
        return by_css(driver, '#log-table tbody tr td[data-col="line"]')[0].text

    pages = -(-total // 50)
    assert by_css(driver, "#log-pager .page-of")[0].text == f"page 1 of {pages}"
    assert len(by_css(driver, "#log-table tbody tr")) == 50 and first_line() == "0"
    by_css(driver, "#log-pager .next")[0].click()
    assert first_line() == "50"
    assert by_css(driver, "#log-pager .page-of")[0].text == f"page 2 of {pages}"
    by_css(driver, "#log-pager .prev")[0].click()
    assert first_line() == "0"


def test_a_copied_report_works_alone(driver: Any, sites: dict[str, Path],
                                     tmp_path: Path) -> None:
    copy = tmp_path / "elsewhere" / "report"
    shutil.copytree(sites["errored"], copy)
    for page in (copy / "index.html", copy / "episodes" / "ep0001.html"):
        open_page(driver, page)  # a file that failed to load would be a console error
        urls = driver.execute_script(REFERENCED_URLS)
        assert urls, "the page refers to no file"
        assert all(url.startswith(file_url(copy) + "/") for url in urls), urls
        for url in urls:
            assert Path(url.removeprefix("file://").split("#")[0]).is_file(), url
        # the script ran and the stylesheet applied
        assert driver.execute_script(
            "return getComputedStyle(document.querySelector('.state')).borderRadius") == "10px"
    assert any(url.endswith("ep0001.frames.png") for url in urls)
    assert "policy crashed on GoToLocal-0001" in by_css(driver, "#episode-error summary")[0].text
    assert len(by_css(driver, "#log-table tbody tr")) > 0


REFERENCED_URLS = """
const urls = [];
document.querySelectorAll('script[src]').forEach(e => urls.push(e.src));
document.querySelectorAll('link[href], a[href]').forEach(e => urls.push(e.href));
document.querySelectorAll('img[src]').forEach(e => urls.push(e.src));
document.querySelectorAll('*').forEach(e => {
  const m = /url\\("?([^")]+)"?\\)/.exec(getComputedStyle(e).backgroundImage);
  if (m) { urls.push(m[1]); }
});
return urls;
"""


def test_a_5000_episode_report_opens_fast_and_stays_small(driver: Any, tmp_path: Path
                                                          ) -> None:
    run = tmp_path / "20250101_120000"
    run.mkdir()
    rows = [{"episode_index": i, "episode_id": f"GoToLocal-{i:04d}", "status":
             "error" if i % 97 == 0 else "ok", "instruction": f"go to the {i % 7} key",
             "metrics": {"success": float(i % 3 != 0), "spl": (i % 10) / 10,
                         "ndtw": (i % 13) / 13, "sdtw": (i % 5) / 5,
                         "path_length": float(i % 17), "nav_error": float(i % 4)},
             "step_count": 3 + i % 40, "elapsed_sec": 0.01, "finished_at":
             f"2025-01-01T12:{i // 600:02d}:{i % 60:02d}", "worker_id": i % 8, "attempts": 1}
            for i in range(5000)]
    agg = aggregate(rows)
    write_json_atomic(run / "summary.json", {
        "run_id": run.name, "graph_name": "bot", "dataset": "babyai", "split": "GoToLocal",
        "worker_count": 8, "status": "done", "episodes_total": 5000, "episodes_finished": 5000,
        "counts_by_status": {"ok": 4948, "error": 52}, "error_count": 52,
        "metrics": agg.means, "metrics_ci95": agg.ci95, "metrics_n": agg.n,
        "episodes": rows}, durable=False)
    touch_done(run)
    out = tmp_path / "site"
    assert main(["report", str(run), "-o", str(out), "--episodes", "0-9"]) == 0
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert (out / "data" / "episodes.js").stat().st_size < 1_000_000
    assert size < 1_500_000, size
    started = time.monotonic()
    open_page(driver, out / "index.html")
    took = time.monotonic() - started
    assert len(by_css(driver, "#episodes tbody tr")) == 100  # one page of rows
    assert by_css(driver, "#shown-count")[0].text == "showing 1-100 of 5000 episodes"
    assert took < 2.0, f"the index took {took:.2f} s to load"
    by_css(driver, "#pager .next")[0].click()
    assert row_indices(driver)[0] == 100
