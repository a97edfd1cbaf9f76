"""`sweeper.trainers.metrics.accuracy_percent`: the one accuracy expression of every
trainer and of `--evaluate`."""

from __future__ import annotations

import pytest

from sweeper.trainers.metrics import accuracy_percent


def test_accuracy_is_exactly_the_float_expression_of_the_counts():
    for total in (1, 7, 187, 189, 200, 10_007):
        for correct in range(0, total + 1, max(1, total // 50)):
            assert accuracy_percent(correct, total) == 100.0 * correct / total


def test_accuracy_is_not_rounded():
    assert accuracy_percent(154, 187) == 100.0 * 154 / 187
    assert accuracy_percent(154, 187) != 82.4  # fairseq's display value (one decimal)
    assert (accuracy_percent(0, 189), accuracy_percent(189, 189)) == (0.0, 100.0)


def test_counts_reconstruct_from_the_accuracy():
    """Every value is 100 * k / total for one integer k, recovered by rounding: what
    the integration test checks recorded accuracies with."""
    for total in (187, 189):
        for correct in range(total + 1):
            value = accuracy_percent(correct, total)
            assert round(value * total / 100) == correct


def test_an_empty_split_has_no_accuracy():
    with pytest.raises(ValueError, match="empty"):
        accuracy_percent(0, 0)
