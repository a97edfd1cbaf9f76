"""What a user sees in the MLflow UI that `sweeper ui` serves, in a real browser.

A finished sweep (2 inits × 2 seeds of the dummy trainer), `sweeper ui` on its store,
headless Chromium (tests/support/browser.py; skipped without one). Checked as a user
would look: the printed link lands on the runs table of the model-training view; the
table groups by `sweeper.group`; each trial's run page shows `best_test_accuracy` equal
to Table 1's test accuracy, its system metrics and its datasets (the prepared
data's splits; the tiny test corpus lives in a folder named `corpus`). With
$SWEEPER_SCREENSHOTS set (`make browser`), the pages are saved for the docs.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweeper import record_names
from sweeper.tracking.links import MODEL_TRAINING_VIEW, run_url
from tests.support.browser import (
    chrome,
    click_text,
    require_chrome,
    screenshot,
    value_after,
    wait_for_text,
)
from tests.support.cluster import free_port
from tests.support.processes import kill_group
from tests.support.sweeps import new_sweep, run_sweeper, sweeper_command, sweeper_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GROUPS = ("dummy/pretrained/full", "dummy/random/full")


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


def test_the_ui_shows_the_runs_table_groups_and_table_1_numbers(served: dict):
    url, trials = served["url"], served["trials"]
    base, experiment_id = re.match(r"(http://[^/]+)/#/experiments/(\d+)/", url).groups()  # type: ignore[union-attr]
    with chrome() as driver:  # skips, saying why, without a browser or selenium
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        driver.get(url)
        shown = wait_for_text(driver, "5 matching runs")  # the parent and its 4 trials
        assert "Overview" not in shown.splitlines()  # not MLflow 3's GenAI overview

        click_text(driver, "Group by", "button")
        click_text(driver, record_names.TAG_GROUP)
        shown = wait_for_text(driver, f"Group: {GROUPS[0]}")
        assert f"Group: {GROUPS[1]}" in shown
        assert all(trial["run_name"] in shown for trial in trials)
        assert "corpus/train" in shown  # the Dataset column of the trial rows
        screenshot(driver, "mlflow-runs-grouped.png")

        for trial in trials:
            driver.get(run_url(base, experiment_id, trial["run_id"]))
            shown = wait_for_text(driver, record_names.METRIC_BEST_TEST_ACC)
            shown_best = float(value_after(shown, record_names.METRIC_BEST_TEST_ACC))
            assert shown_best == pytest.approx(trial["test_accuracy"]), trial["run_name"]
            assert float(value_after(shown, record_names.METRIC_BEST_STEP)) == trial["best_step"]
            assert "system/process_memory_usage_megabytes" in shown  # System metrics
            assert "corpus/train" in shown  # Datasets: the prepared data's train split
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
