"""`--evaluate`'s example-level verdicts and tally, on evaluations made by hand."""

from __future__ import annotations

from sweeper.summarize.evaluate import Evaluation, examples_cell, mismatches, tally, to_markdown


def _evaluation(measured: float | None = 75.0, **examples) -> Evaluation:
    return Evaluation("r", "hf-random-full-s1", "hf", 30, 75.0, measured, **examples)


def test_each_verdict_says_what_the_examples_did():
    assert _evaluation().verdict == "ok (no stored predictions)"
    assert _evaluation(examples=189).verdict == "ok (189 of 189 examples agree)"
    many = _evaluation(examples=189, differing=tuple(range(2, 9)))
    assert many.verdict == "EXAMPLES DIFFER (7 of 189 examples differ (ids 2, 3, 4, 5, 6, ...))"
    assert not many.agrees and many.metric_agrees
    wrong = _evaluation(75.5, examples=189, differing=(4,))
    assert wrong.verdict == "MISMATCH (+0.5; 1 of 189 examples differ (ids 4))"
    unread = _evaluation(predictions_problem="predictions file of format 9")
    assert not unread.agrees
    assert unread.verdict == "NOT COMPARED (stored predictions: predictions file of format 9)"
    assert _evaluation(None, problem="artifact missing").verdict == "not measured: artifact missing"
    assert mismatches([_evaluation(), many, wrong, unread]) == [many, wrong, unread]


def test_the_tally_counts_examples_over_the_trials_that_stored_them():
    plain = [_evaluation(), _evaluation()]
    assert tally(plain, "test_accuracy") == "2 of 2 agree, exactly"
    stored = [_evaluation(examples=10), _evaluation(examples=10, differing=(1, 2)), _evaluation()]
    assert tally(stored, "test_accuracy") == (
        "2 of 3 agree, exactly; 18 of 20 test examples agree"
        " (1 trial(s) not compared example by example)"
    )
    assert [examples_cell(e) for e in stored] == ["10 of 10", "8 of 10", ""]
    assert "| 8 of 10 | EXAMPLES DIFFER" in to_markdown(stored)
