"""A sweep selected on validation loss (`select:`), through real Ray and MLflow.

A 2-trial dummy sweep with `select: {metric: valid_loss, report: [test_loss,
test_accuracy]}`: every trial run carries the best-checkpoint metrics of that selection
(lowest validation loss, the two test metrics there); the sweep run records the
selection, so `summarize --experiment` (no spec) reads the same Table 1 as `summarize
SPEC`; the spec's selection drives the tables.
"""

from __future__ import annotations

import json

import pytest

from sweeper.selection import Selection
from tests.support.sweeps import history, new_sweep, run_sweeper, runs_by_role

pytestmark = pytest.mark.integration

SELECT = {"metric": "valid_loss", "report": ["test_loss", "test_accuracy"]}


def test_a_loss_selected_sweep_records_and_summarises_by_loss(tmp_path, tmp_path_factory):
    spec, out = new_sweep(tmp_path, tmp_path_factory, "selected", select=SELECT)
    done = run_sweeper("run", spec)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "best_valid_loss" in done.stdout  # the driver's own summary: Table 1's header

    (parent,), trials = runs_by_role(out, "selected")
    assert Selection.from_json(parent.data.tags["sweeper.select"]) == Selection(
        "valid_loss", "min", ("test_loss", "test_accuracy")
    )
    by_spec = run_sweeper("summarize", spec, "--format", "json", "--no-log")
    uri = f"sqlite:///{out / 'mlflow.db'}"
    by_tag = run_sweeper(
        "summarize", "--experiment", "selected", "--tracking-uri", uri, "--format", "json",
        "--no-log",
    )  # fmt: skip
    assert by_spec.returncode == 0 and by_tag.returncode == 0, by_spec.stderr + by_tag.stderr
    summary = json.loads(by_spec.stdout)
    assert summary["trials"] == json.loads(by_tag.stdout)["trials"]
    assert summary["selection"] == {**SELECT, "mode": "min"}
    rows = {row["run_id"]: row for row in summary["trials"]}
    assert len(rows) == len(trials) == 2
    for run in trials:
        row, metrics = rows[run.info.run_id], run.data.metrics
        assert metrics["best_valid_loss"] == row["best_valid_loss"]
        assert metrics["best_test_loss"] == row["test_loss"]
        assert metrics["best_test_accuracy"] == row["test_accuracy"]
        assert metrics["best_step"] == row["best_step"]
        # Accuracy is logged at the loss-selected checkpoint too (record_names.HEADLINE_METRICS):
        # the validation accuracy of that step, not the best one of the run.
        at_step = dict(history(out, run.info.run_id, "valid_accuracy"))
        assert metrics["best_valid_accuracy"] == at_step[row["best_step"]]
        assert row["best_valid_loss"] == pytest.approx(min(_history(out, run, "valid_loss")))


def _history(out, run, key: str) -> list[float]:
    return [value for _, value in history(out, run.info.run_id, key)]
