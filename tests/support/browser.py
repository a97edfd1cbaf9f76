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
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
    """A headless Chromium WebDriver in a new, empty profile (what a first visit sees:
    no stored UI state), quit on exit."""
    browser, driver = require_chrome()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    with tempfile.TemporaryDirectory(prefix="sweeper-chrome-") as profile:
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    f"--window-size={width},{height}", f"--user-data-dir={profile}"):  # fmt: skip
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
    return wait_for(driver, lambda shown: text in shown, timeout, repr(text))


def wait_for(
    driver: Any, shows: Callable[[str], bool], timeout: float = 60, what: str = "the page"
) -> str:
    """Poll the page's text until `shows` holds for it (an error in `shows` counts as
    not yet); that text."""
    deadline = time.monotonic() + timeout
    while True:
        shown = page_text(driver)
        with contextlib.suppress(Exception):
            if shows(shown):
                return shown
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not shown within {timeout:.0f}s; page:\n{shown[:3000]}")
        time.sleep(0.5)


def table_cells(driver: Any, column: str) -> dict[str, str]:
    """The runs table's cells of one column (its id, e.g. "metrics.`best_test_accuracy`"),
    keyed by the text of their whole row: the grid draws a row in parts (pinned name,
    scrolled columns) that share its `row-index`."""
    rows: dict[str, list[str]] = {}
    cells: dict[str, str] = {}
    for part in driver.execute_script(
        "return [...document.querySelectorAll('.ag-row')].map(r => {"
        "  const c = r.querySelector(`[col-id='${arguments[0]}']`);"
        "  return [r.getAttribute('row-index'), r.innerText, c ? c.innerText : null]; })",
        column,
    ):
        index, text, cell = part
        rows.setdefault(index, []).append(text)
        if cell is not None:
            cells[index] = cell
    return {" ".join(rows[index]): cell for index, cell in cells.items()}


Box = tuple[float, float, float, float]
"""A rectangle in the viewport's CSS pixels: left, top, right, bottom."""


@dataclass(frozen=True)
class Cell:
    """One cell of the runs table as the browser draws it."""

    row: str  # the grid's row-index, shared by the parts (pinned, scrolled) of one row
    column: str
    text: str
    box: Box
    clear: bool  # what the browser shows at its centre and each corner is the cell itself
    whole: bool  # no text in it is cut short (no box in it clips its overflow)


_CELLS = """
const [columns] = arguments;
const box = e => {
  const r = e.getBoundingClientRect();
  return [r.left, r.top, r.right, r.bottom];
};
const clear = e => {
  const [l, t, r, b] = box(e);
  if (r - l < 3 || b - t < 3) return false;
  const xs = [l + 1, (l + r) / 2, r - 1], ys = [t + 1, (t + b) / 2, b - 1];
  return xs.every(x => ys.every(y => {
    const hit = document.elementFromPoint(x, y);
    return hit !== null && e.contains(hit);
  }));
};
// cut short: a box that clips its overflow (with an ellipsis or not) is narrower than
// its content; 1-pixel boxes are screen-reader text, never shown
const whole = e => [e, ...e.querySelectorAll('*')].every(x =>
  getComputedStyle(x).overflowX === 'visible' || x.clientWidth <= 1
  || x.scrollWidth <= x.clientWidth);
const found = [];
for (const row of document.querySelectorAll('.ag-row')) {
  for (const cell of row.querySelectorAll('.ag-cell[col-id]')) {
    const column = cell.getAttribute('col-id');
    if (columns.includes(column))
      found.push([
        row.getAttribute('row-index'), column, cell.innerText, box(cell), clear(cell), whole(cell)
      ]);
  }
}
return found;
"""


def drawn_cells(driver: Any, columns: list[str]) -> list[Cell]:
    """The runs table's cells of `columns` (ids, e.g. "metrics.`best_step`"), as drawn
    now. The grid renders only the columns in its scrolled window, so a column scrolled
    out of sight has no cells here."""
    return [
        Cell(row, column, text, tuple(box), clear, whole)  # type: ignore[arg-type]
        for row, column, text, box, clear, whole in driver.execute_script(_CELLS, columns)
    ]


def assistant_panel(driver: Any) -> Box | None:
    """The rectangle of MLflow's Assistant side panel, None while it is closed. The
    panel is the `data-assistant-ui` element laid out in the page's flow; the
    Assistant's floating button (position fixed) is not the panel."""
    found = driver.execute_script(
        "return [...document.querySelectorAll('div[data-assistant-ui]')]"
        "  .filter(e => getComputedStyle(e).position !== 'fixed')"
        "  .map(e => e.getBoundingClientRect()).map(r => [r.left, r.top, r.right, r.bottom])"
        "  .filter(([l, t, r, b]) => r > l && b > t)"
    )
    return tuple(found[0]) if found else None  # type: ignore[return-value]


def close_assistant(driver: Any) -> None:
    """Click the Assistant panel's close button (the profile remembers it closed)."""
    from selenium.webdriver.common.by import By

    selector = "div[data-assistant-ui] button[aria-label='Close']"
    driver.find_element(By.CSS_SELECTOR, selector).click()
    time.sleep(1.0)


def viewport(driver: Any) -> Box:
    """The rectangle of the window's viewport."""
    width, height = driver.execute_script(
        "return [document.documentElement.clientWidth, document.documentElement.clientHeight]"
    )
    return (0.0, 0.0, float(width), float(height))


def intersects(a: Box, b: Box) -> bool:
    """Whether two rectangles share any area (touching edges share none)."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def inside(a: Box, b: Box) -> bool:
    """Whether rectangle `a` lies wholly within `b`."""
    return b[0] <= a[0] and b[1] <= a[1] and a[2] <= b[2] and a[3] <= b[3]


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
    """Save the page, as shown (nothing is clicked), into $SWEEPER_SCREENSHOTS if set."""
    folder = os.environ.get(SCREENSHOTS_ENV)
    if not folder:
        return None
    time.sleep(1.0)  # the last requests' renders
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path
