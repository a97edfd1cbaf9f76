"""What the test set can resolve, as the tables and the results paragraph say it.

The comparisons table gets three columns where any comparison has test-set statistics
(`Comparison.test_set`, `sweeper.summarize.resolution`): the interval over the test
examples, the combined exact McNemar p, and the seeds x examples interval; the
resolution itself is said in words in the comparison's note. A summary without test
predictions gets none of it, so its report reads as before. The cells go through
`sweeper.summarize.cells`, so the paragraph quotes the tables' text.
"""

from __future__ import annotations

from typing import Any

from sweeper.summarize.cells import NA, Render, interval, p_text
from sweeper.summarize.records import Comparison, Summary
from sweeper.summarize.resolution import resolution_words

TEST_SET_HEADER = "Test set (95%, examples)"
MCNEMAR_HEADER = "p (McNemar, exact)"
COMBINED_HEADER = "Seeds x examples (95%)"


def _nested(render: Render) -> Render:
    """`render` applied to the row's `test_set` record; "n/a" without one."""

    def cell(row: dict[str, Any]) -> str:
        stats = row.get("test_set")
        return NA if stats is None else render(stats)

    return cell


TEST_SET_CELL = _nested(interval("low", "high"))
MCNEMAR_CELL = _nested(lambda s: NA if s.get("p_mcnemar") is None else p_text(s["p_mcnemar"]))
SEEDS_X_EXAMPLES_CELL = _nested(interval("combined_low", "combined_high"))


def has_test_set(summary: Summary) -> bool:
    """Whether any comparison has test-set statistics (then the columns are shown)."""
    return any(c.test_set is not None for c in summary.comparisons)


def title_text(summary: Summary) -> str:
    """What the comparisons table's title adds about the test set ('' without it)."""
    if not has_test_set(summary):
        return ""
    return (
        f"; {TEST_SET_HEADER}: BCa bootstrap of the difference over the test examples, "
        "each group's trials pooled (another test set, these trials); "
        f"{MCNEMAR_HEADER}: the seed pairs' exact McNemar tests combined (binomial test of "
        f"the pooled discordant counts); {COMBINED_HEADER}: t interval with the seeds' and "
        "the test examples' variance (other seeds and another test set of the same size); "
        "where the difference lies below what the test set can resolve at the decision "
        "level, the note says so and seeds needed is not offered"
    )


def rule_text(summary: Summary) -> str:
    """The rule's addition under `--population` ('' otherwise)."""
    if not summary.population:
        return ""
    return (
        " (--population: the seeds x examples p and interval where the trials hold test "
        "predictions)"
    )


def rule_sentence(summary: Summary) -> str:
    """The paragraph's sentence on `--population` ('' otherwise)."""
    if not summary.population:
        return ""
    return (
        " Where the trials hold test predictions, the test and interval are the seeds x "
        "examples ones (--population): the claim is about other seeds and another test "
        "set of the same size, not about this test set alone."
    )


def decided_interval_words(c: Comparison) -> str:
    """`seeds x examples` where that interval decided the comparison, else ''."""
    return "seeds x examples " if c.test_set is not None and c.test_set.decides else ""


def evidence(c: Comparison, row: dict[str, Any]) -> str:
    """The paragraph's clause on the test set: `; this test set's sampling: 95% interval
    [-1.2, 1.5] over its 189 examples, McNemar p = 0.62` ('' without test-set statistics)."""
    if c.test_set is None:
        return ""
    stats = c.test_set
    text = (
        f"; this test set's sampling: 95% interval {TEST_SET_CELL(row)} over its "
        f"{stats.examples} examples"
    )
    if stats.p_mcnemar is not None:
        text += f", McNemar p = {MCNEMAR_CELL(row)}"
    combined = SEEDS_X_EXAMPLES_CELL(row)
    if combined != NA and not stats.decides:
        text += f"; seeds x examples 95% interval {combined}"
    return text


def below_words(c: Comparison) -> str:
    """The resolution in words for a comparison below it ('' otherwise)."""
    if c.test_set is None or not c.test_set.below_resolution:
        return ""
    return resolution_words(c.test_set)
