"""Headless Chromium through Selenium, for tests of what users see in the MLflow UI.

Nothing can download a browser here, so the system's `chromium` and `chromedriver`
(Debian: `apt-get install chromium chromium-driver`; `make browser` does it) are used;
`$SWEEPER_CHROMIUM` / `$SWEEPER_CHROMEDRIVER` name others. Without them, or without
Selenium, `chrome()` skips the test and says why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SCREENSHOTS_ENV = "SWEEPER_SCREENSHOTS"
"""A folder to save the tests' screenshots in (`make browser` names docs/figures)."""


def _find(env: str, *names: str) -> str | None:
    return os.environ.get(env) or next(filter(None, map(shutil.which, names)), None)


def require_chrome() -> tuple[str, str]:
    """The Chromium and chromedriver binaries, or skip the test (before it spends time on
    a sweep it could not look at)."""
    pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    browser = _find("SWEEPER_CHROMIUM", "chromium", "chromium-browser", "google-chrome")
    driver = _find("SWEEPER_CHROMEDRIVER", "chromedriver")
    if not browser or not driver:
        pytest.skip("no chromium/chromedriver: `make browser` installs them (Debian)")
    return browser, driver


@contextlib.contextmanager
def chrome(width: int = 1600, height: int = 1000) -> Iterator[Any]:
    """A headless Chromium WebDriver, quit on exit."""
    browser, driver = require_chrome()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}"):  # fmt: skip
        options.add_argument(arg)
    session = webdriver.Chrome(service=Service(driver), options=options)
    try:
        yield session
    finally:
        session.quit()


def page_text(driver: Any) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


def wait_for_text(driver: Any, text: str, timeout: float = 60) -> str:
    """Poll the page until `text` shows (the UI renders after its API calls return)."""
    deadline = time.monotonic() + timeout
    while True:
        shown = page_text(driver)
        if text in shown:
            return shown
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not shown within {timeout:.0f}s; page:\n{shown[:3000]}")
        time.sleep(0.5)


def click_text(driver: Any, text: str, tag: str = "*") -> None:
    """Click the element whose whole visible text is `text`."""
    from selenium.webdriver.common.by import By

    driver.find_element(By.XPATH, f"//{tag}[normalize-space()='{text}']").click()
    time.sleep(1.0)


def value_after(text: str, label: str) -> str:
    """The line after `label` in a page's text (MLflow's key/value tables render so)."""
    lines = text.splitlines()
    return lines[lines.index(label) + 1]


def screenshot(driver: Any, name: str) -> Path | None:
    """Save the page into $SWEEPER_SCREENSHOTS (if set), MLflow's assistant panel
    closed so the page has the whole width."""
    from selenium.webdriver.common.by import By

    folder = os.environ.get(SCREENSHOTS_ENV)
    if not folder:
        return None
    for button in driver.find_elements(By.XPATH, "//button[@aria-label='Close']"):
        with contextlib.suppress(Exception):
            button.click()
    time.sleep(1.0)
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path
