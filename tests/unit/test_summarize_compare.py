"""Comparisons on every axis, paired tests, Holm and decisions, against known answers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.stats
from test_summarize_stats import PRETRAINED, RANDOM, trial

from sweeper.summarize.compare import compare, pairs, variant_values
from sweeper.summarize.decide import decide, holm, seeds_needed, with_aso
from sweeper.summarize.records import NotCounted
from sweeper.summarize.stats import by_seed, group_stats, paired_t, welch, wilcoxon_p

# Student (1908) / R's `sleep` data: extra hours of sleep under two drugs, same 10
# patients. R's `t.test(extra ~ group, data = sleep, paired = TRUE)` documents
# t = -4.0621, df = 9, p-value = 0.002833, 95% CI -2.4598858 -0.7001142 (group 1 - 2).
SLEEP_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
SLEEP_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


def test_paired_t_matches_students_sleep_data():
    result = paired_t([a - b for a, b in zip(SLEEP_1, SLEEP_2, strict=True)])
    assert result.t == pytest.approx(-4.0621, abs=1e-4)
    assert result.df == 9
    assert result.p_value == pytest.approx(0.002833, abs=1e-6)
    assert (result.ci_low, result.ci_high) == pytest.approx((-2.4598858, -0.7001142))
    assert result.p_value == pytest.approx(scipy.stats.ttest_rel(SLEEP_1, SLEEP_2).pvalue)


def test_wilcoxon_matches_scipys_documented_example():
    """scipy.stats.wilcoxon's docstring: these differences give p = 0.04126 two-sided."""
    d = [6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75]
    assert wilcoxon_p(d) == pytest.approx(0.041259765625)
    assert wilcoxon_p([1.0]) is None and wilcoxon_p([0.0, 0.0]) is None


def test_holm_against_a_hand_computed_case():
    """Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04; the
    step-down keeps them monotone, so 0.04 becomes 0.06. None stays out of the family."""
    got = holm([0.01, 0.04, None, 0.03, 0.005])
    assert got == pytest.approx([0.03, 0.06, None, 0.06, 0.02])
    assert holm([None]) == [None]


def test_holm_rejects_as_a_documented_example_does():
    """R package HDLSSkST's `Holm` documents, for these p-values at alpha = 0.05, the
    rejections 0 0 1 0 0 0 1; sweeper decides where the adjusted p < alpha."""
    adjusted = holm([0.50, 0.01, 0.001, 0.69, 0.02, 0.05, 0.0025])
    assert [int(p < 0.05) for p in adjusted] == [0, 0, 1, 0, 0, 0, 1]
    assert adjusted == pytest.approx([1.0, 0.05, 0.007, 1.0, 0.08, 0.15, 0.015])


def test_report_000_comparison_is_paired_and_decided():
    trials = [
        *(
            trial("fairseq/pretrained/full", s, v)
            for s, v in zip((1, 2, 3), PRETRAINED, strict=True)
        ),
        *(trial("fairseq/random/full", s, v) for s, v in zip((1, 2, 3), RANDOM, strict=True)),
    ]
    (c,) = decide(compare(group_stats(trials), trials), trials)
    assert (c.axis, c.kind, c.test, c.n_pairs) == ("init", "pretrained - random", "paired t", 3)
    ref = scipy.stats.ttest_rel(PRETRAINED, RANDOM)
    assert c.diff == pytest.approx(13.0) and c.p_value == pytest.approx(ref.pvalue)
    assert c.p_holm == pytest.approx(c.p_value)  # a family of one
    assert c.decision == "fairseq/pretrained/full better" and c.seeds_needed is None
    assert (c.boot_low, c.boot_high) == (None, None)  # three values: no bootstrap
    assert c.p_wilcoxon is None  # its smallest exact p with 3 pairs is 0.25: never < 0.05


def test_paired_decides_where_welch_does_not():
    """Seeds vary a lot, the difference within a seed hardly at all: only pairing sees it."""
    base = [70.0, 76.0, 81.0, 73.0, 79.0]
    a = [v + 1.0 + e for v, e in zip(base, (0.1, -0.1, 0.05, 0.0, -0.05), strict=True)]
    trials = [
        *(trial("hf/pretrained/full", s, v) for s, v in enumerate(a, 1)),
        *(trial("fairseq/pretrained/full", s, v) for s, v in enumerate(base, 1)),
    ]
    (c,) = decide(compare(group_stats(trials), trials), trials)
    assert c.paired and c.kind == "fairseq - hf" and c.diff == pytest.approx(-1.0)
    assert c.decision == "hf/pretrained/full better"
    assert welch(base, a).p_value > 0.5  # unpaired, the same data decides nothing


def test_unmatched_seeds_fall_back_to_welch():
    trials = [
        trial("fairseq/pretrained/full", 1, 80.0),
        trial("fairseq/pretrained/full", 2, 81.0),
        trial("fairseq/random/full", 3, 65.0),
        trial("fairseq/random/full", 4, 66.0),
    ]
    (c,) = compare(group_stats(trials), trials)
    assert (c.paired, c.test, c.n_pairs, c.p_wilcoxon) == (False, "Welch t", 0, None)
    assert c.p_value == pytest.approx(
        scipy.stats.ttest_ind([80.0, 81.0], [65.0, 66.0], equal_var=False).pvalue
    )


def test_lora_sweep_compares_every_axis():
    """sweeps/lora.yaml's groups: full vs each LoRA rank, and rank 8 vs 16."""
    trials = [
        trial(group, s, 70.0 + i + s / 10)
        for i, group in enumerate(
            ["hf/pretrained/full", "hf/pretrained/lora[lora.r=16]", "hf/pretrained/lora[lora.r=8]"]
        )
        for s in (1, 2, 3)
    ]
    got = [(c.axis, c.kind, c.within) for c in compare(group_stats(trials), trials)]
    assert got == [
        ("method", "full - lora[lora.r=16]", "hf/pretrained"),
        ("method", "full - lora[lora.r=8]", "hf/pretrained"),
        ("lora.r", "lora.r=8 - lora.r=16", "hf/pretrained/lora"),
    ]


def test_groups_differing_on_two_axes_are_not_compared():
    trials = [trial(g, s, 70.0 + s) for g in ("fairseq/pretrained/full", "hf/random/full")
              for s in (1, 2)]  # fmt: skip
    assert list(pairs(group_stats(trials))) == []


def test_variant_values_keep_commas_inside_values():
    assert variant_values("lora.r=8,lora.target_modules=['query', 'value'],train.lr=0.001") == {
        "lora.r": "8",
        "lora.target_modules": "['query', 'value']",
        "train.lr": "0.001",
    }


def test_seeds_needed_is_the_textbook_power_answer():
    """A paired effect of one standard deviation needs 10 pairs for power 0.8 at 0.05
    (two-sided one-sample t: n = 9.94)."""
    raw = [1.0, 2.0, 0.0, 1.5, 0.5]  # mean 1: shifted and scaled to sd 1, mean 1
    a = [50.0 + 1.0 + (d - 1.0) / scipy.stats.tstd(raw) for d in raw]
    trials = [
        *(trial("hf/pretrained/full", s, v) for s, v in enumerate(a, 1)),
        *(trial("hf/random/full", s, 50.0) for s in range(1, 6)),
    ]
    (c,) = compare(group_stats(trials), trials)
    assert seeds_needed(c, by_seed(trials), 0.05) == 10


def test_undecided_comparison_says_how_many_seeds():
    trials = [
        *(
            trial("fairseq/pretrained/full", s, v)
            for s, v in zip((1, 2, 3), (80.0, 81.0, 79.0), strict=True)
        ),
        *(
            trial("hf/pretrained/full", s, v)
            for s, v in zip((1, 2, 3), (79.5, 81.2, 79.1), strict=True)
        ),
    ]
    (c,) = decide(compare(group_stats(trials), trials), trials)
    assert c.decision == "undecided" and c.seeds_needed is not None and c.seeds_needed > 3


def test_not_counted_runs_are_tallied_per_group_and_noted():
    trials = [trial("hf/pretrained/full", s, 80.0 + s) for s in (1, 2)]
    trials += [trial("hf/random/full", s, 60.0 + s) for s in (1, 2)]
    lost = [
        NotCounted("r1", "", "k1", "hf/random/full", 3, "failed: boom", "failed"),
        NotCounted("r2", "", "k2", "hf/random/full", 4, "failed: nan", "diverged"),
        NotCounted("r3", "", "k3", "hf/random/full", 5, "early-stopped", "early_stopped"),
        NotCounted("r4", "", "k4", "hf/random/full", 1, "search-stage trial", "search"),
    ]
    groups = {g.group: g for g in group_stats(trials, lost)}
    assert groups["hf/random/full"].outcomes == {"failed": 1, "diverged": 1, "early_stopped": 1}
    assert groups["hf/pretrained/full"].outcomes == {}
    (c,) = compare(list(groups.values()), trials)
    assert "hf/random/full: 1 failed, 1 diverged, 1 early-stopped not counted" in c.note


def test_almost_stochastic_order_option():
    """deepsig's ASO: report 000's pretrained scores dominate the random ones (eps ~ 0);
    swapped, the random ones do not dominate (eps ~ 1)."""
    trials = [
        *(
            trial("fairseq/pretrained/full", s, v)
            for s, v in zip((1, 2, 3), PRETRAINED, strict=True)
        ),
        *(trial("fairseq/random/full", s, v) for s, v in zip((1, 2, 3), RANDOM, strict=True)),
    ]
    (c,) = with_aso(compare(group_stats(trials), trials), trials)
    assert c.aso is not None and c.aso < 0.2
    swapped = dataclasses.replace(c, group_a=c.group_b, group_b=c.group_a)
    (s,) = with_aso([swapped], trials)
    assert s.aso is not None and s.aso > 0.8


def test_probability_of_improvement_and_dz_against_statsmodels():
    """P(A > B) over seed-matched pairs (a tie is half a win) with statsmodels' Wilson
    interval; d_z is the mean difference over the differences' sample sd."""
    from statsmodels.stats.proportion import proportion_confint

    from sweeper.summarize.compare import cohens_dz, probability_of_improvement

    d = [1.0, -1.0, 2.0, 0.0, 3.0]
    share, low, high = probability_of_improvement(d)
    assert share == pytest.approx(0.7)
    assert (low, high) == pytest.approx(proportion_confint(3.5, 5, method="wilson"))
    assert probability_of_improvement([2.0, 1.0, 3.0])[2] == 1.0
    assert cohens_dz(d) == pytest.approx(np.mean(d) / np.std(d, ddof=1))
    assert cohens_dz([1.0, 1.0]) is None
