"""`sweeper.trainers.metrics`: the one accuracy and macro-F1 expressions of every trainer
and of `--evaluate`."""

from __future__ import annotations

from fractions import Fraction

import pytest

from sweeper.trainers.metrics import (
    ClassCounts,
    accuracy_percent,
    class_metric_name,
    classification_metrics,
    macro_f1_percent,
)


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


# Macro-F1 and per-class values (`ClassCounts`): known answers from scikit-learn.


def _sklearn(y_true: list[int], y_pred: list[int]) -> tuple[float, dict[str, float]]:
    """scikit-learn's macro-F1 and per-class values (in %) over the classes of y_true
    and y_pred, the definition `metrics` documents."""
    from sklearn.metrics import f1_score, precision_recall_fscore_support

    labels = sorted(set(y_true) | set(y_pred))
    macro = f1_score(y_true, y_pred, average="macro", zero_division=0)
    p, r, f, _ = precision_recall_fscore_support(
        y_true, y_pred, labels=labels, average=None, zero_division=0
    )
    per_class: dict[str, float] = {}
    for i, c in enumerate(labels):
        per_class[class_metric_name("precision", c)] = 100 * p[i]
        per_class[class_metric_name("recall", c)] = 100 * r[i]
        per_class[class_metric_name("f1", c)] = 100 * f[i]
    return 100 * macro, per_class


CASES = {
    "binary": ([0, 1, 1, 0, 1, 1, 0, 0, 1, 1], [0, 1, 0, 0, 1, 1, 1, 0, 1, 0]),
    "three classes, unbalanced": (
        [0] * 12 + [1] * 5 + [2] * 2,
        [0] * 9 + [1, 1, 2] + [1, 1, 1, 0, 2] + [2, 0],
    ),
    "a class never predicted": ([0, 0, 1, 1, 2, 2, 2], [0, 1, 1, 1, 0, 1, 0]),
    "a class predicted but absent from the labels": ([0, 0, 1, 1], [0, 2, 1, 1]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_macro_f1_and_per_class_values_match_scikit_learn(case):
    y_true, y_pred = CASES[case]
    counts = ClassCounts.of(y_pred, y_true)
    macro, per_class = _sklearn(y_true, y_pred)
    assert macro_f1_percent(counts) == pytest.approx(macro, rel=1e-12, abs=0)
    assert counts.per_class().keys() == per_class.keys()
    for name, value in counts.per_class().items():
        assert value == pytest.approx(per_class[name], rel=1e-12, abs=1e-12), name
    assert accuracy_percent(counts.correct(), counts.total()) == pytest.approx(
        100 * sum(p == t for p, t in zip(y_pred, y_true, strict=True)) / len(y_true)
    )


def test_macro_f1_is_the_nearest_float_to_the_exact_mean():
    """Bit-exact by construction: the value depends on the counts only."""
    counts = ClassCounts.of(*reversed(CASES["three classes, unbalanced"]))
    tp, fp, fn = counts.tp, counts.fp, counts.fn
    exact = sum(Fraction(2 * tp[c], 2 * tp[c] + fp[c] + fn[c]) for c in range(3)) / 3
    assert macro_f1_percent(counts) == float(100 * exact)
    assert counts == ClassCounts((9, 3, 1), (2, 2, 2), (3, 2, 1))


def test_a_class_absent_from_labels_and_predictions_is_left_out():
    """A 4-class head on data with 2 classes: classes 2 and 3 do not lower macro-F1."""
    y_true, y_pred = CASES["binary"]
    wide = ClassCounts.of(y_pred, y_true, num_classes=4)
    assert wide.num_classes == 4 and wide.present() == [0, 1]
    assert macro_f1_percent(wide) == macro_f1_percent(ClassCounts.of(y_pred, y_true))
    assert "f1_class3" not in wide.per_class()


def test_never_predicted_class_has_zero_precision_recall_and_f1():
    counts = ClassCounts.of([0, 0, 0], [0, 1, 1])
    values = counts.per_class()
    assert (values["precision_class1"], values["recall_class1"], values["f1_class1"]) == (0, 0, 0)
    assert macro_f1_percent(counts) == float(100 * Fraction(1, 2) * Fraction(1, 2))


def test_perfect_and_empty_predictions():
    assert macro_f1_percent(ClassCounts.of([0, 1, 2], [0, 1, 2])) == 100.0
    assert macro_f1_percent(ClassCounts.of([1, 2, 0], [0, 1, 2])) == 0.0
    with pytest.raises(ValueError, match="empty"):
        macro_f1_percent(ClassCounts.of([], [], num_classes=3))
    assert classification_metrics(ClassCounts.of([0, 1], [0, 1]))["macro_f1"] == 100.0
    with pytest.raises(ValueError):
        ClassCounts((1,), (0, 0), (0,))
