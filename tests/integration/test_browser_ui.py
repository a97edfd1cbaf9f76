"""What a user sees in the MLflow UI that `sweeper ui` serves, in a real browser.

A finished sweep (2 inits × 2 seeds of the dummy trainer), `sweeper ui` on its store,
headless Chromium in a new profile (tests/support/browser.py; skipped without one).
Checked as a user would look, nothing clicked on the first page: the link exactly as
printed lands on the runs table of the model-training view, grouped by `sweeper.group`
with every trial row shown and its `best_test_accuracy` equal to Table 1's test
accuracy, `best_valid_accuracy` and `best_step` columns. MLflow's Assistant panel opens
beside the table on this first visit; the name and the three best-checkpoint columns
of every group and trial row are drawn whole, inside the window, uncovered and apart
from the panel (element rectangles, and what the browser hit-tests at each cell's
centre and corners). Then the panel is closed, as a user would, and stays closed on a
reload and the pages after (the profile remembers it). Each trial's run page shows its
best-checkpoint metrics, system metrics, datasets (the prepared data's splits; the tiny
test corpus lives in a folder named `corpus`) and its logged model. With
$SWEEPER_SCREENSHOTS set (`make browser`), the pages are saved for the docs as they
were shown: the runs table untouched, the pages after with the panel closed.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sweeper import record_names
from sweeper.tracking.links import MODEL_TRAINING_VIEW, NAME_COLUMN, metric_column, run_url
from tests.support.browser import (
    Cell,
    assistant_panel,
    chrome,
    click_text,
    close_assistant,
    drawn_cells,
    inside,
    intersects,
    require_chrome,
    screenshot,
    table_cells,
    value_after,
    viewport,
    wait_for_text,
)
from tests.support.cluster import free_port
from tests.support.processes import kill_group
from tests.support.sweeps import new_sweep, run_sweeper, sweeper_command, sweeper_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GROUPS = ("dummy/pretrained/full", "dummy/random/full")
BEST_COLUMNS = (
    record_names.METRIC_BEST_TEST_ACC,
    record_names.METRIC_BEST_VALID_ACC,
    record_names.METRIC_BEST_STEP,
)


@pytest.fixture
def served(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A finished sweep, its Table 1 (summarize JSON) and `sweeper ui`'s printed URL."""
    require_chrome()
    grid = {"seed": [1, 2], "init": ["pretrained", "random"], "framework": ["dummy"]}
    spec, _ = new_sweep(tmp_path, tmp_path_factory, "browse", grid=grid)
    done = run_sweeper("run", spec, "--figures")  # the parent run's report.html has them
    assert done.returncode == 0, done.stderr[-3000:]
    summary = run_sweeper("summarize", spec, "--format", "json", "--no-log")
    assert summary.returncode == 0, summary.stderr[-3000:]
    report = json.loads(summary.stdout)
    trials = report["trials"]
    proc = subprocess.Popen(
        sweeper_command("ui", spec, "--port", str(free_port())),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=sweeper_env(), start_new_session=True,
    )  # fmt: skip
    try:
        url = _printed_url(proc)
        yield {"url": url, "trials": trials, "parent": report["parent_run_id"]}
    finally:
        kill_group(proc.pid)


def _printed_url(proc: subprocess.Popen[str]) -> str:
    seen = []
    for line in proc.stdout or ():
        seen.append(line)
        found = re.search(r"MLflow UI: (\S+)", line)
        if found:
            return found.group(1)
    raise AssertionError(f"`sweeper ui` printed no URL (exit {proc.poll()}):\n{''.join(seen)}")


def test_the_printed_link_opens_on_the_result_and_runs_list_their_models(served: dict):
    url, trials = served["url"], served["trials"]
    base, experiment_id = re.match(r"(http://[^/]+)/#/experiments/(\d+)/", url).groups()  # type: ignore[union-attr]
    with chrome() as driver:  # a new profile; skips, saying why, without a browser or selenium
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        # The link exactly as printed, nothing clicked: the first view is the result.
        driver.get(url)
        shown = wait_for_text(driver, f"Group: {GROUPS[1]}")
        assert f"Group: {GROUPS[0]}" in shown  # grouped by sweeper.group
        assert "Overview" not in shown.splitlines()  # not MLflow 3's GenAI overview
        shown = wait_for_text(driver, trials[-1]["run_name"])  # the groups are expanded
        assert all(trial["run_name"] in shown for trial in trials), shown[:3000]
        assert "corpus/train" in shown  # the Dataset column of the trial rows
        cells = table_cells(driver, metric_column(record_names.METRIC_BEST_TEST_ACC))
        for trial in trials:  # best_test_accuracy shown beside each trial = Table 1's
            (value,) = [text for row, text in cells.items() if trial["run_name"] in row]
            assert shown_number(value) == pytest.approx(trial["test_accuracy"], abs=rounding(value))
        for name in (record_names.METRIC_BEST_VALID_ACC, record_names.METRIC_BEST_STEP):
            assert table_cells(driver, metric_column(name)), f"no {name} column"
        _assert_nothing_covers_the_result(driver, trials)
        screenshot(driver, "mlflow-runs-grouped.png")

        # Closed once, the panel stays closed in this profile: on a reload of the page
        # (the browser's own view of the table: the UI has added its search settings to
        # the address, and a shared view is not loaded over those) and on the pages after.
        close_assistant(driver)
        driver.refresh()
        wait_for_text(driver, "matching runs")
        assert assistant_panel(driver) is None, "the closed Assistant panel came back"

        for trial in trials:
            driver.get(run_url(base, experiment_id, trial["run_id"]))
            shown = wait_for_text(driver, record_names.METRIC_BEST_TEST_ACC)
            shown_best = float(value_after(shown, record_names.METRIC_BEST_TEST_ACC))
            assert shown_best == pytest.approx(trial["test_accuracy"]), trial["run_name"]
            assert float(value_after(shown, record_names.METRIC_BEST_STEP)) == trial["best_step"]
            assert "system/process_memory_usage_megabytes" in shown  # System metrics
            assert "corpus/train" in shown  # Datasets: the prepared data's train split
            assert assistant_panel(driver) is None, "the closed Assistant panel came back"
            # Its logged model: the run page's table of the models a run outputs
            shown = wait_for_text(driver, "Logged models (1)")
            listed = shown.split("Logged models (1)")[1].split("About this run")[0].splitlines()
            assert {trial["run_name"], "Output", "Ready"} <= set(listed), listed
        screenshot(driver, "mlflow-trial-run.png")

        # The Models tab: one logged model (the best checkpoint) per trial.
        driver.get(f"{base}/#/experiments/{experiment_id}/models?{MODEL_TRAINING_VIEW}")
        shown = wait_for_text(driver, trials[0]["run_name"])
        assert all(trial["run_name"] in shown for trial in trials), shown[:2000]
        screenshot(driver, "mlflow-models.png")

        # The parent run's HTML report, as the artifact viewer renders it (an iframe).
        page = f"{base}/#/experiments/{experiment_id}/runs/{served['parent']}/artifacts"
        driver.get(f"{page}?{MODEL_TRAINING_VIEW}")
        wait_for_text(driver, "report")
        click_text(driver, "report")
        click_text(driver, "report.html")
        frame = WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.TAG_NAME, "iframe"))[0]
        screenshot(driver, "mlflow-parent-report.png")
        driver.switch_to.frame(frame)
        shown = wait_for_text(driver, "Table 2.")
        assert "Table 1." in shown and GROUPS[0] in shown
        assert driver.find_elements(By.TAG_NAME, "img"), "the figures are not inline"


def _assert_nothing_covers_the_result(driver: Any, trials: list[dict]) -> None:
    """The name and the best-checkpoint cells of every group and trial row are drawn
    inside the window, each the topmost element over its whole box, its text not cut
    short, and none meets MLflow's Assistant panel (which opens beside the table on a
    first visit to a local server)."""
    columns = [NAME_COLUMN, *(metric_column(name) for name in BEST_COLUMNS)]
    cells = drawn_cells(driver, columns)
    rows: dict[str, dict[str, Cell]] = {}
    for cell in cells:
        rows.setdefault(cell.row, {})[cell.column] = cell
    names = [row[NAME_COLUMN].text for row in rows.values() if set(columns) <= set(row)]
    for name in [*(f"Group: {group}" for group in GROUPS), *(t["run_name"] for t in trials)]:
        assert any(name in shown.splitlines() for shown in names), (name, names)
    window, panel = viewport(driver), assistant_panel(driver)
    # a new profile on 127.0.0.1: the panel is open, so the layout is checked beside it
    assert panel is not None, "MLflow's Assistant panel did not open on a first visit"
    for cell in cells:
        assert inside(cell.box, window), f"{cell} is not wholly in the window {window}"
        assert cell.clear, f"{cell} is covered or clipped"
        assert cell.whole, f"{cell} shows its text cut short"
        assert not intersects(cell.box, panel), f"{cell} meets the Assistant panel {panel}"


def shown_number(text: str) -> float:
    return float(text.strip().replace(",", ""))


def rounding(text: str) -> float:
    """Half a unit of the last digit shown: the table may round what it shows."""
    decimals = len(text.strip().partition(".")[2])
    return 0.5 * 10**-decimals + 1e-9
