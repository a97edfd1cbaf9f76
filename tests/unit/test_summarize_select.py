"""Which runs count and which checkpoint is selected, on hand-made records (no MLflow)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from sweeper import record_names
from sweeper.summarize.records import CountedTrial, NotCounted, Point, RunRecord
from sweeper.summarize.select import best_checkpoint, by_step, screen, select, status_reason

BASE = RunRecord(
    run_id="r1",
    run_name="hf-pretrained-full-s1",
    parent_run_id="p",
    mlflow_status="FINISHED",
    start_time=1000,
    end_time=61000,
    role=record_names.ROLE_TRIAL,
    sweep="demo",
    trial_key="k1",
    group="hf/pretrained/full",
    seed=1,
    init="pretrained",
    framework="hf",
    method="full",
    stage="grid",
    status=record_names.Status.FINISHED,
    error=None,
    trainable_params=None,
)


def history(valid, test, epoch=None):
    """{metric: points} from [(step, value)] lists; timestamps follow list order."""

    def points(pairs):
        return tuple(Point(step, i, value) for i, (step, value) in enumerate(pairs))

    out = {record_names.METRIC_VALID_ACC: points(valid), record_names.METRIC_TEST_ACC: points(test)}
    if epoch is not None:
        out[record_names.METRIC_EPOCH] = points(epoch)
    return out


@pytest.mark.parametrize(
    ("mlflow_status", "status", "error", "reason"),
    [
        ("FINISHED", "finished", None, None),
        (
            "FAILED",
            "failed",
            "Traceback\nValueError: bad lr",
            "failed (MLflow status FAILED): ValueError: bad lr",
        ),
        ("KILLED", "running", None, "interrupted (MLflow status KILLED)"),
        ("FINISHED", "failed", None, "failed"),
        ("FINISHED", "early_stopped", None, "early-stopped by the scheduler"),
        ("RUNNING", "running", None, "not finished (MLflow status RUNNING, status tag running)"),
        ("RUNNING", "finished", None, "not finished (MLflow status RUNNING, status tag finished)"),
        ("FINISHED", "running", None, "not finished (MLflow status FINISHED, status tag running)"),
        ("FINISHED", None, None, "no sweeper.status tag"),
        ("FINISHED", "paused", None, "unknown sweeper.status 'paused'"),
    ],
)
def test_status_rules(mlflow_status, status, error, reason):
    run = replace(BASE, mlflow_status=mlflow_status, status=status, error=error)
    assert status_reason(run) == reason


def test_long_error_is_shortened():
    run = replace(BASE, status="failed", error="x" * 500)
    reason = status_reason(run)
    assert reason is not None and reason.endswith("...") and len(reason) < 200


def test_screen_keeps_the_earliest_started_run_per_key():
    late = replace(BASE, run_id="late", start_time=5000)
    early = replace(BASE, run_id="early", start_time=2000)
    other = replace(BASE, run_id="other", trial_key="k2", seed=2)
    nokey = replace(BASE, run_id="nokey", trial_key=None)
    search = replace(BASE, run_id="search", trial_key="k3", stage="search")
    kept, left = screen([late, other, early, nokey, search])
    assert sorted(r.run_id for r in kept) == ["early", "other"]
    reasons = {n.run_id: n.reason for n in left}
    assert reasons["late"].startswith("duplicate: trial key k1 is already counted")
    assert reasons["late"].endswith("earlier-started run early")
    assert reasons["nokey"] == "no sweeper.trial_key tag"
    assert reasons["search"].startswith("search-stage trial")


def test_failed_run_does_not_shadow_a_later_finished_one():
    failed = replace(BASE, run_id="a", start_time=1, status="failed", mlflow_status="FAILED")
    retry = replace(BASE, run_id="b", start_time=2)
    kept, left = screen([failed, retry])
    assert [r.run_id for r in kept] == ["b"] and [n.run_id for n in left] == ["a"]


def test_best_validation_ties_go_to_the_earliest_step():
    result = best_checkpoint(
        BASE,
        history(
            valid=[(100, 70.0), (200, 85.0), (300, 85.0), (400, 84.0)],
            test=[(100, 1.0), (200, 71.0), (300, 99.0), (400, 98.0)],
            epoch=[(100, 0.5), (200, 1.0), (300, 1.5), (400, 2.0)],
        ),
    )
    assert isinstance(result, CountedTrial)
    assert (
        result.best_step,
        result.best_valid,
        result.test_value,
        result.best_epoch,
    ) == (
        200,
        85.0,
        71.0,
        1.0,
    )
    assert result.valid_curve == ((100, 70.0), (200, 85.0), (300, 85.0), (400, 84.0))
    assert result.wall_time == 60.0  # no wall_time metric: end - start


def test_relogged_step_uses_the_latest_value_and_nan_is_ignored():
    result = best_checkpoint(
        replace(BASE, latest={record_names.METRIC_WALL_TIME: 42.0}),
        history(
            valid=[(100, 90.0), (200, 60.0), (100, 50.0), (200, float("nan"))],
            test=[(100, 10.0), (200, 20.0), (100, 11.0)],
        ),
    )
    assert isinstance(result, CountedTrial)
    assert (result.best_step, result.best_valid, result.test_value) == (200, 60.0, 20.0)
    assert result.wall_time == 42.0
    assert all(math.isfinite(v) for _, v in result.valid_curve)


def test_points_out_of_order_are_sorted_by_timestamp():
    points = (Point(5, 30, 3.0), Point(5, 10, 1.0), Point(5, 20, 2.0), Point(1, 0, 7.0))
    assert by_step(points) == {1: 7.0, 5: 3.0}


@pytest.mark.parametrize(
    ("valid", "test", "reason"),
    [
        ([], [(1, 50.0)], "no valid_accuracy logged"),
        ([(1, 50.0), (2, 60.0)], [(1, 40.0)], "no test_accuracy at its best validation step 2"),
        ([(1, 50.0)], [], "no test_accuracy at its best validation step 1"),
    ],
)
def test_unusable_histories_are_not_counted(valid, test, reason):
    result = best_checkpoint(BASE, history(valid, test))
    assert isinstance(result, NotCounted) and result.reason == reason


def test_select_orders_by_group_then_seed():
    runs = [
        replace(BASE, run_id="c", seed=2, trial_key="c"),
        replace(
            BASE,
            run_id="d",
            seed=1,
            trial_key="d",
            framework="fairseq",
            group="fairseq/pretrained/full",
        ),
        replace(BASE, run_id="a", seed=1, trial_key="a"),
        replace(BASE, run_id="x", seed=3, trial_key="x"),
    ]
    histories = {r.run_id: history([(1, 50.0)], [(1, 40.0)]) for r in runs[:3]}
    trials, left = select(runs, histories)
    assert [t.run_id for t in trials] == ["d", "a", "c"]
    assert [(n.run_id, n.reason) for n in left] == [("x", "no valid_accuracy logged")]
