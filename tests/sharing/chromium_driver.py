"""A headless Debian chromium driven by selenium, for the report's browser tests.

The machine's network is closed: without these flags chromium stalls on its first-run,
sync, component and QUIC probes. Each browser gets a fresh profile dir.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,1000")


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install '.[test]')"
    if CHROMIUM is None or CHROMEDRIVER is None:
        return "chromium / chromium-driver not installed (apt-get install chromium chromium-driver)"
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless chromium whose console log ``driver.get_log("browser")`` returns."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager go online
    profile = tempfile.mkdtemp(prefix="evaltui-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        driver.set_page_load_timeout(30)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def console_problems(driver: Any) -> list[str]:
    """Console entries at warning level or worse since the last call."""
    return [f"{e['level']}: {e['message']}" for e in driver.get_log("browser")
            if e["level"] in ("SEVERE", "WARNING")]


def file_url(path: Path) -> str:
    return Path(path).resolve().as_uri()
