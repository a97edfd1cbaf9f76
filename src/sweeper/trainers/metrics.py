"""Classification metrics from counts: the expressions every trainer and `--evaluate` use.

A recorded accuracy is always `accuracy_percent(correct, total)` on integer counts, and
a recorded macro-F1 always `macro_f1_percent` of per-class counts (`ClassCounts`):
fairseq's criterion (`fairseq_main.exact_accuracy`) and its log parser
(`fairseq.parse_log_line`), HF's `compute_metrics` (`hf_data.compute_accuracy`), the
causal LM's exact match (`lm_data.measure`) and the reload of a stored checkpoint
(`reload.py`). Each value is the correctly rounded float of an exact rational number
of the counts, so a trial's logged value, the value its framework chose its best
checkpoint on and the value re-measured from that checkpoint are equal bit for bit,
not merely close, whenever the predictions are the same: nothing depends on the order
in which batches were summed or on the device. Nothing here imports anything heavy.

Macro-F1, precisely. For class c with TP_c true positives, FP_c false positives and
FN_c false negatives, F1_c = 2·TP_c / (2·TP_c + FP_c + FN_c) (the harmonic mean of
precision and recall, written so that it is defined whenever the class occurs). The
macro-F1 is the unweighted mean of F1_c over the classes that occur in the split's
labels or predictions; a class with no true and no predicted example has no F1 and is
left out of the mean (a head may have more classes than the data, `train.num_classes`).
That is exactly scikit-learn's `f1_score(y_true, y_pred, average="macro")`, whose
classes are those of y_true and y_pred (any `zero_division`: none of its classes has
a zero denominator). A class that occurs but is never predicted correctly has F1 0.
Per class, precision TP/(TP+FP) and recall TP/(TP+FN) are 0 when their denominator is
0 (a class never predicted, or one absent from the labels), as scikit-learn's
`zero_division=0`. Every value is a percentage (0-100), like accuracy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction


def accuracy_percent(correct: int, total: int) -> float:
    """`100.0 * correct / total`: the percentage (0-100) of `total` examples that are
    right, unrounded. Counts are Python ints (convert tensors with `int()` first); an
    empty split has no accuracy and is an error, never 0 or NaN."""
    if total <= 0:
        raise ValueError(f"accuracy of {total} examples: the split is empty")
    return 100.0 * correct / total


@dataclass(frozen=True)
class ClassCounts:
    """Per-class TP, FP and FN of one split's predictions, index = class id (the
    position of the label in `data.labels`, in fairseq and HF alike)."""

    tp: tuple[int, ...]
    fp: tuple[int, ...]
    fn: tuple[int, ...]

    def __post_init__(self) -> None:
        if not len(self.tp) == len(self.fp) == len(self.fn):
            raise ValueError(f"{len(self.tp)} TP, {len(self.fp)} FP, {len(self.fn)} FN counts")
        if min((*self.tp, *self.fp, *self.fn), default=0) < 0:
            raise ValueError("negative class count")

    @classmethod
    def of(
        cls, predictions: Iterable[int], labels: Iterable[int], num_classes: int = 0
    ) -> ClassCounts:
        """Counts of paired predicted and true class ids; `num_classes` at least (more
        when an id is larger)."""
        pairs = [(int(p), int(t)) for p, t in zip(predictions, labels, strict=True)]
        size = max([num_classes, *(max(p, t) + 1 for p, t in pairs)])
        tp, fp, fn = [0] * size, [0] * size, [0] * size
        for predicted, true in pairs:
            if predicted == true:
                tp[true] += 1
            else:
                fp[predicted] += 1
                fn[true] += 1
        return cls(tuple(tp), tuple(fp), tuple(fn))

    @classmethod
    def from_rows(cls, tp: Sequence[int], fp: Sequence[int], fn: Sequence[int]) -> ClassCounts:
        return cls(tuple(int(v) for v in tp), tuple(int(v) for v in fp), tuple(int(v) for v in fn))

    @property
    def num_classes(self) -> int:
        return len(self.tp)

    def occurs(self, c: int) -> bool:
        """Whether class `c` is among the labels or the predictions."""
        return self.tp[c] + self.fp[c] + self.fn[c] > 0

    def present(self) -> list[int]:
        """The classes macro-F1 averages over (see the module docstring)."""
        return [c for c in range(self.num_classes) if self.occurs(c)]

    def correct(self) -> int:
        return sum(self.tp)

    def total(self) -> int:
        """Examples counted: every example is a TP or an FN of its true class."""
        return sum(self.tp) + sum(self.fn)

    def macro_f1(self) -> float:
        return macro_f1_percent(self)

    def per_class(self) -> dict[str, float]:
        """`precision_class<c>`, `recall_class<c>`, `f1_class<c>` (percent) of every class
        that occurs (`class_metric_name`)."""
        values: dict[str, float] = {}
        for c in self.present():
            tp, fp, fn = self.tp[c], self.fp[c], self.fn[c]
            values[class_metric_name("precision", c)] = _percent(Fraction(tp, tp + fp or 1))
            values[class_metric_name("recall", c)] = _percent(Fraction(tp, tp + fn or 1))
            values[class_metric_name("f1", c)] = _percent(_f1(tp, fp, fn))
        return values


CLASS_METRIC_KINDS = ("precision", "recall", "f1")


def class_metric_name(kind: str, c: int) -> str:
    """`f1_class2`: a per-class measurement's name in metric events (logged as
    `valid_f1_class2`, `test_f1_class2`: letters, digits and underscores only, so safe
    as an MLflow key and a Ray result key)."""
    if kind not in CLASS_METRIC_KINDS:
        raise ValueError(f"unknown per-class metric {kind!r}")
    return f"{kind}_class{c}"


def _f1(tp: int, fp: int, fn: int) -> Fraction:
    return Fraction(2 * tp, 2 * tp + fp + fn)


def _percent(value: Fraction) -> float:
    """The float nearest to `100 * value` (Python's Fraction -> float is correctly
    rounded)."""
    return float(100 * value)


def macro_f1_percent(counts: ClassCounts) -> float:
    """Macro-F1 in percent (module docstring): the float nearest to the exact mean of
    the classes' F1, so it depends on the counts only, never on summation order. No
    class occurring (an empty split) is an error, as for accuracy."""
    present = counts.present()
    if not present:
        raise ValueError("macro-F1 of 0 examples: the split is empty")
    mean = sum((_f1(counts.tp[c], counts.fp[c], counts.fn[c]) for c in present), Fraction(0))
    return _percent(mean / len(present))


def classification_metrics(counts: ClassCounts) -> dict[str, float]:
    """Every classification measurement besides accuracy and loss, by event name:
    `macro_f1` and the per-class values (`ClassCounts.per_class`)."""
    return {"macro_f1": macro_f1_percent(counts), **counts.per_class()}
