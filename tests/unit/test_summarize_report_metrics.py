"""The comparisons as numbers on the parent run: what an MLflow chart can plot."""

from __future__ import annotations

from sweeper.summarize.report import comparison_metrics
from tests.support.summaries import FP, sequential_summary


def test_each_comparison_logs_its_decision_and_interval():
    summary = sequential_summary()
    metrics = comparison_metrics(summary)
    for c in summary.comparisons:
        base = f"summary/compare/{c.kind}/{c.within}/"
        assert metrics[base + "diff"] == c.diff
        assert metrics[base + "look"] == c.look
        assert metrics[base + "n_pairs"] == c.n_decision
        assert metrics[base + "decided"] == float(c.decision != "undecided")
        assert metrics[base + "equivalent"] == float(c.decision.startswith("equivalent"))
        if c.decision_low is not None:
            assert metrics[base + "decision_low"] == c.decision_low
        if c.decision == f"{c.group_a} better":
            assert metrics[base + "a_better"] == 1.0
        elif c.decision == f"{c.group_b} better":
            assert metrics[base + "a_better"] == -1.0
        else:
            assert metrics[base + "a_better"] == 0.0
    assert any(c.decision == f"{FP} better" for c in summary.comparisons)
