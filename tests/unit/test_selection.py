"""The one best-point rule: highest (or lowest) value, ties to the earliest step."""

from __future__ import annotations

import math

import pytest

from sweeper.selection import best_point, is_better


def test_highest_value_wins_whatever_the_order() -> None:
    assert best_point([(450, 80.0), (225, 81.5), (675, 79.0)]) == (225, 81.5)


def test_ties_go_to_the_earliest_step() -> None:
    assert best_point([(675, 81.0), (225, 81.0), (450, 70.0)]) == (225, 81.0)


def test_min_mode_takes_the_lowest() -> None:
    assert best_point([(1, 0.5), (2, 0.25), (3, 0.25)], mode="min") == (2, 0.25)


@pytest.mark.parametrize("missing", [None, math.nan])
def test_missing_values_are_never_best(missing: float | None) -> None:
    assert best_point([(1, missing), (2, 10.0)]) == (2, 10.0)
    assert best_point([(1, missing)]) is None


def test_no_points_no_best() -> None:
    assert best_point([]) is None


def test_is_better_is_strict() -> None:
    assert is_better(1.0, None)
    assert not is_better(1.0, 1.0)
    assert is_better(0.5, 1.0, mode="min")


def test_best_metrics_name_a_best_point_and_leave_out_what_is_unknown():
    from sweeper import record_names
    from sweeper.selection import best_metrics

    assert best_metrics(74.0, {record_names.METRIC_TEST_ACC: 71.5}, 20, 2.0) == {
        record_names.METRIC_BEST_VALID_ACC: 74.0,
        record_names.METRIC_BEST_TEST_ACC: 71.5,
        record_names.METRIC_BEST_STEP: 20.0,
        record_names.METRIC_BEST_EPOCH: 2.0,
    }
    assert set(best_metrics(74.0, {}, 20, None)) == {
        record_names.METRIC_BEST_VALID_ACC,
        record_names.METRIC_BEST_STEP,
    }
