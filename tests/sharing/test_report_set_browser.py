"""A set's report in a real browser (headless chromium, from file://): the set's table
with the members' numbers, the plot over checkpoints loaded, and a member's link opening
its own run report, all without a console error."""

from __future__ import annotations

from pathlib import Path

import pytest
from chromium_driver import chromium, console_problems, file_url, missing

from evaltui.cli import main
from evaltui.rundir.jsonfiles import read_json

pytestmark = pytest.mark.browser
if missing() is not None:
    pytest.skip(str(missing()), allow_module_level=True)


def test_the_set_page_table_plot_and_member_links_work(
        real_set: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    out = tmp_path / "site"
    assert main(["report", str(real_set), "-o", str(out), "--episodes", "none"]) == 0
    members = {m["key"]: m for m in read_json(real_set / "set.json")["members"]}
    with chromium() as driver:
        driver.get(file_url(out / "index.html"))
        assert console_problems(driver) == []
        rows = driver.find_elements(By.CSS_SELECTOR, "#set-members tbody tr")
        assert {r.get_attribute("data-key") for r in rows} == set(members)
        for row in rows:
            m = members[row.get_attribute("data-key")]
            mean = read_json(Path(m["run_dir"]) / "summary.json")["metrics"]["success"]
            cell = row.find_element(By.CSS_SELECTOR, 'td[data-metric="success"]')
            assert cell.text.startswith(f"{mean:.3f} [")
            assert cell.is_displayed()
        # Every mean [CI] on one line (they wrapped over three): a range over the cell's
        # text has one box per line it is laid out on.
        lines = driver.execute_script(
            "return Array.from(document.querySelectorAll('#set-members td.mean')).map(td => {"
            " const r = document.createRange(); r.selectNodeContents(td);"
            " return new Set(Array.from(r.getClientRects()).map(b => Math.round(b.top))).size;"
            "})")
        assert lines and set(lines) == {1}, lines
        img = driver.find_element(By.CSS_SELECTOR, 'img[src="plots/success_over_steps.svg"]')
        assert driver.execute_script("return arguments[0].naturalWidth", img) > 0
        key, m = next(iter(members.items()))
        driver.find_element(By.CSS_SELECTOR, f'tr[data-key="{key}"] a.member-link').click()
        assert driver.current_url.endswith(f"/runs/{m['run_id']}/index.html")
        assert console_problems(driver) == []
        assert m["run_id"] in driver.find_element(By.CSS_SELECTOR, "h1").text
