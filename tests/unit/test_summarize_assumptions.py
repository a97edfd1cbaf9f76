"""What the t-based decisions assume, shown: skewness flags, collapsed trials, the exact
sign-flip p beside each decision, and a zero-width interval printed as what it is."""

from __future__ import annotations

import html
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats
from test_summarize_stats import trial

from sweeper.summarize.assumptions import (
    SKEW_FALSE_FLAG,
    collapsed_class,
    sample_skewness,
    skew_threshold,
    skewed,
)
from sweeper.summarize.compare import compare
from sweeper.summarize.core import _collapsed
from sweeper.summarize.decide import decide
from sweeper.summarize.html import to_html
from sweeper.summarize.latex import to_latex
from sweeper.summarize.paragraph import results_paragraph
from sweeper.summarize.stats import group_stats
from sweeper.summarize.tables import build_tables, to_csv, to_json, to_markdown
from sweeper.summarize.terminal import to_plain
from sweeper.trainers.metrics import ClassCounts
from tests.support.summaries import holm_summary

A, B = "fairseq/pretrained/full", "fairseq/random/full"


# --- skewness --------------------------------------------------------------------------


def test_sample_skewness_is_scipys():
    rng = np.random.default_rng(1)
    for _ in range(200):
        x = rng.exponential(size=int(rng.integers(3, 30)))
        assert sample_skewness(list(x)) == pytest.approx(stats.skew(x), rel=1e-9, abs=1e-12)
    assert sample_skewness([1.0, 2.0]) is None and sample_skewness([3.0, 3.0, 3.0]) is None


@pytest.mark.parametrize("n", [6, 10, 20, 250])
def test_normal_differences_are_flagged_at_the_stated_rate(n):
    """Under normal differences the flag rate is SKEW_FALSE_FLAG (1%), within 3 standard
    errors of a simulation independent of the one that set the threshold (at 250
    pairs, past SKEW_SIMULATED_MAX_N, the threshold is D'Agostino's transform)."""
    rng = np.random.default_rng(100 + n)
    runs = 6000
    flagged = sum(skewed(list(rng.normal(3.0, 2.0, size=n))) is not None for _ in range(runs))
    se = np.sqrt(SKEW_FALSE_FLAG * (1 - SKEW_FALSE_FLAG) / runs)
    assert abs(flagged / runs - SKEW_FALSE_FLAG) <= 3 * se + 0.002  # + the threshold's own noise


def test_skewed_differences_are_flagged_far_more_often():
    """Centred exponential differences (rare large wins) at 20 pairs: flagged in over a
    third of samples, against 1% for normal ones. Below 6 pairs nothing is flagged: a
    tie of lattice values reaches the cap of |g1| there (24.5, 24, 24.5: -0.71)."""
    rng = np.random.default_rng(2)
    flagged = sum(skewed(list(rng.exponential(size=20) - 1)) is not None for _ in range(1000))
    assert flagged / 1000 > 0.35
    assert sample_skewness([24.5, 24.0, 24.5]) == pytest.approx(-1 / np.sqrt(2))
    assert skew_threshold(3) <= 1 / np.sqrt(2) and skewed([24.5, 24.0, 24.5]) is None


def test_a_skewed_comparison_says_so_and_shows_the_exact_p():
    """One seed of twelve far off the rest: the note names the skewness."""
    d = [0.1, -0.2, 0.0, 0.2, -0.1, 0.1, 0.0, -0.1, 0.2, 0.1, -0.2, 9.0]
    trials = [
        *(trial(A, s, 70.0 + x) for s, x in enumerate(d, 1)),
        *(trial(B, s, 70.0) for s, _ in enumerate(d, 1)),
    ]
    (c,) = decide(compare(group_stats(trials), trials), trials)
    assert "differences skewed (skewness +3." in c.note
    assert c.p_sign_flip == pytest.approx(stats.permutation_test(
        (np.array(d),), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
        n_resamples=np.inf, vectorized=True,
    ).pvalue)  # fmt: skip


# --- collapsed trials -------------------------------------------------------------------


def _latest(predictions, labels, num_classes=2):
    counts = ClassCounts.of(predictions, labels, num_classes)
    latest = {f"test_{k}": v for k, v in counts.per_class().items()}
    latest["test_accuracy"] = 100.0 * counts.correct() / counts.total()
    return latest


def test_collapsed_class_reads_one_class_predicted_for_every_example():
    labels = [0, 1, 1, 0, 1, 2, 2, 1]
    assert collapsed_class(_latest([1] * 8, labels, 3)) == 1
    assert collapsed_class(_latest([0] * 4, [0, 1, 1, 0])) == 0
    assert collapsed_class(_latest([0, 1, 1, 0], [0, 1, 1, 0])) is None  # all right
    assert collapsed_class(_latest([1, 1, 1, 2, 1, 2, 2, 1], labels, 3)) is None
    # one class fully recalled, every other never right, but not all predicted as it:
    assert collapsed_class(_latest([1, 2, 1, 1, 1, 0, 0, 1], labels, 3)) is None
    assert collapsed_class({"test_accuracy": 51.0}) is None  # no per-class metrics


def test_a_collapsed_trial_is_flagged_in_table_1_the_notes_and_its_comparisons():
    trials = [trial(A, s, 80.0 + s) for s in (1, 2, 3)]
    trials += [trial(B, s, 51.0) for s in (1, 2)]
    trials.append(replace(trial(B, 3, 51.0), collapsed_class=0))
    summary = replace(holm_summary(), trials=trials)
    table1 = build_tables(summary)[0]
    assert table1.columns[-1].header == "Note"
    flag = "collapsed: every test prediction class 0 (last evaluation)"
    assert table1.text_rows()[-1][-1] == flag
    assert table1.text_rows()[0][-1] == ""
    (note,) = _collapsed(trials)
    assert note.startswith("1 counted trial(s) predicted one class") and f"{B} seed 3" in note
    (c,) = compare(group_stats(trials), trials)
    assert f"{B}: collapsed trial(s), every test prediction one class (seed 3)" in c.note
    plain = build_tables(holm_summary())[0]
    assert "Note" not in [column.header for column in plain.columns]  # none collapsed


# --- rendering ----------------------------------------------------------------------------


def _no_spread_summary():
    """The first comparison without spread: every seed's difference -0.53 (one example
    of 189), interval and decision interval both the point."""
    summary = holm_summary()
    first = replace(
        summary.comparisons[0], diff=-0.53, ci_low=-0.53, ci_high=-0.53, decision_low=-0.53,
        decision_high=-0.53, equivalent_within=None, p_sign_flip=0.0078,
    )  # fmt: skip
    return replace(summary, comparisons=[first, *summary.comparisons[1:]])


def test_a_zero_width_interval_is_never_printed_as_an_interval():
    summary = _no_spread_summary()
    texts = {
        "terminal": to_plain(summary),
        "markdown": to_markdown(summary),
        "html": html.unescape(to_html(summary)),
        "latex": to_latex(summary),
        "paragraph": results_paragraph(summary),
    }
    for name, text in texts.items():
        assert "[-0.53, -0.53]" not in text, name
        assert "-0.53 (no spread)" in text, name
    assert "-0.53 (no spread)" in to_latex(summary).replace("{}", "")
    row = next(r for r in to_csv(summary).splitlines() if r.startswith("init,"))
    assert ",-0.53,-0.53," in row  # CSV and JSON keep the values; equal bounds: no spread
    assert '"ci_low": -0.53' in to_json(summary) and '"ci_high": -0.53' in to_json(summary)


def test_the_exact_sign_flip_p_sits_beside_the_decision_in_every_table():
    summary = _no_spread_summary()
    comparisons = build_tables(summary)[2]
    headers = [c.header for c in comparisons.columns]
    assert "p (sign-flip, exact)" in headers
    assert comparisons.text_rows()[0][headers.index("p (sign-flip, exact)")] == "0.008"
    for text in (to_plain(summary), to_markdown(summary), to_latex(summary), to_html(summary)):
        assert "p (sign-flip, exact)" in text and "0.008" in text
    csv_lines = to_csv(summary).splitlines()
    header = csv_lines[csv_lines.index("# comparisons") + 1]
    assert "p_sign_flip" in header.split(",")


def test_holm_decision_intervals_carry_their_own_levels():
    """Holm tests each comparison at its own step level: with levels that differ, the
    column names none and each cell names its own."""
    summary = holm_summary()
    levels = [1 - 0.05 / 4, 1 - 0.05 / 3, 0.975, 0.975]
    comparisons = [
        replace(c, decision_level=level)
        for c, level in zip(summary.comparisons, levels, strict=True)
    ]
    table = build_tables(replace(summary, comparisons=comparisons))[2]
    headers = [c.header for c in table.columns]
    assert "Decision interval (level)" in headers
    cells = [row[headers.index("Decision interval (level)")] for row in table.text_rows()]
    assert cells[0] == "[19.00, 29.33] at 98.75%" and cells[2].endswith(" at 97.5%")
