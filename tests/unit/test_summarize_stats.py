"""Table 2 statistics and the comparisons, checked against scipy.stats and report 000."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.stats

from sweeper.summarize.compare import compare
from sweeper.summarize.records import CountedTrial
from sweeper.summarize.stats import describe, group_stats, sample_std, welch

PRETRAINED = [79.9, 78.5, 80.1]  # report 000, Table 1, test accuracy per seed
RANDOM = [65.4, 66.7, 67.4]


def trial(group: str, seed: int, test: float, step: int = 100, params: int | None = None):
    framework, init, rest = group.split("/", 2)
    method, _, variant = rest.partition("[")
    return CountedTrial(
        run_id=f"{group}-{seed}",
        run_name="",
        trial_key=f"{group}-{seed}",
        group=group,
        framework=framework,
        init=init,
        method=method,
        variant=variant.removesuffix("]"),
        seed=seed,
        best_valid=test + 1,
        best_step=step,
        best_epoch=None,
        test_value=test,
        wall_time=None,
        trainable_params=params,
    )


def test_report_000_table2_done_right():
    """Report 000 printed 79.93 ± 0.135 and 67.66 ± 0.0956; its Table 1 gives these."""
    pre, rnd = describe(PRETRAINED), describe(RANDOM)
    assert pre.mean == pytest.approx(79.5)
    assert pre.std == pytest.approx(0.8717797887081347)
    assert rnd.mean == pytest.approx(66.5)
    assert rnd.std == pytest.approx(1.0148891565092217)
    assert pre.std != pytest.approx(0.135) and rnd.mean != pytest.approx(67.66)
    assert (pre.min, pre.max, rnd.min, rnd.max) == (78.5, 80.1, 65.4, 67.4)


@pytest.mark.parametrize(
    "values",
    [PRETRAINED, RANDOM, [1.0, 2.0], [50.0, 50.5, 49.0, 52.25, 51.0, 48.75], [90.0] * 2 + [91.0]],
)
def test_describe_matches_scipy(values):
    d = describe(values)
    assert d.std == pytest.approx(float(scipy.stats.tstd(values)))  # tstd is ddof=1
    low, high = scipy.stats.t.interval(
        0.95, len(values) - 1, loc=d.mean, scale=scipy.stats.sem(values)
    )
    assert (d.ci_low, d.ci_high) == (pytest.approx(low), pytest.approx(high))


def test_n1_has_no_spread_and_no_nan():
    d = describe([80.0])
    assert (d.n, d.mean, d.std, d.ci_low, d.ci_high) == (1, 80.0, None, None, None)
    assert sample_std([80.0]) is None
    with pytest.raises(ValueError):
        describe([])


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (PRETRAINED, RANDOM),
        ([81.0, 82.5, 80.0, 83.0], [80.0, 79.0]),
        ([50.0, 51.0, 52.0], [50.5, 51.5, 49.0, 55.0, 47.0]),
    ],
)
def test_welch_matches_scipy(a, b):
    w = welch(a, b)
    ref = scipy.stats.ttest_ind(a, b, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert w.diff == pytest.approx(sum(a) / len(a) - sum(b) / len(b))
    assert (w.t, w.df, w.p_value) == (
        pytest.approx(ref.statistic),
        pytest.approx(ref.df),
        pytest.approx(ref.pvalue),
    )
    assert (w.ci_low, w.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high))


def test_welch_undefined_cases():
    w = welch([80.0], RANDOM)
    assert w.diff == pytest.approx(80.0 - 66.5)
    assert (w.ci_low, w.ci_high, w.df, w.t, w.p_value) == (None, None, None, None, None)
    w = welch([70.0, 70.0], [60.0, 60.0])  # zero variance: CI is the point, t infinite
    assert (w.diff, w.ci_low, w.ci_high, w.t) == (10.0, 10.0, 10.0, None)
    with warnings.catch_warnings():  # scipy warns of the zero variance it divides by
        warnings.simplefilter("ignore", RuntimeWarning)
        assert scipy.stats.ttest_ind([70.0, 70.0], [60.0, 60.0], equal_var=False).pvalue == 0.0
    # p = 0 would decide from two seeds a group; the exact permutation test says 1/3
    exact = scipy.stats.permutation_test(
        ([70.0, 70.0], [60.0, 60.0]), lambda x, y: np.mean(x) - np.mean(y),
        permutation_type="independent", n_resamples=np.inf,
    )  # fmt: skip
    assert w.p_value == pytest.approx(exact.pvalue) == pytest.approx(1 / 3)
    w = welch([70.0, 70.0], [70.0, 70.0])  # and no difference: nothing defined
    assert (w.diff, w.t, w.p_value) == (0.0, None, None)


def test_group_stats_rows_and_flags():
    trials = [
        *(
            trial("fairseq/pretrained/full", s, v, 100 * s, 1000)
            for s, v in zip((1, 2, 3), PRETRAINED, strict=True)
        ),
        trial("fairseq/random/full", 1, 65.0, 300, 1000),
        trial("fairseq/random/full", 2, 66.0, 400, 1000),
        trial("hf/random/full", 1, 60.0, 500),
    ]
    rows = {g.group: g for g in group_stats(trials)}
    assert list(rows) == ["fairseq/pretrained/full", "fairseq/random/full", "hf/random/full"]
    pre = rows["fairseq/pretrained/full"]
    assert (pre.n, pre.seeds, pre.mean_best_step, pre.trainable_params, pre.note) == (
        3,
        (1, 2, 3),
        200.0,
        (1000,),
        "",
    )
    assert rows["fairseq/random/full"].note == "fewer than 3 runs"
    one = rows["hf/random/full"]
    assert (one.std, one.ci_low, one.note, one.trainable_params) == (
        None,
        None,
        "n = 1: std and CI undefined",
        (),
    )


def test_comparisons_pair_only_groups_differing_in_one_factor():
    trials = [
        trial("fairseq/pretrained/full", 1, 80.0),
        trial("fairseq/pretrained/full", 2, 81.0),
        trial("fairseq/random/full", 1, 65.0),
        trial("fairseq/random/full", 2, 66.0),
        trial("hf/pretrained/full", 1, 82.0),
        trial("hf/pretrained/full", 2, 83.5),
        trial("hf/pretrained/full", 3, 84.0),
        trial("hf/random/lora", 1, 60.0),  # no hf/random/full and no lora partner
        trial("hf/pretrained/lora[lora.r=8]", 1, 70.0),  # vs hf/pretrained/full (method)
    ]
    cmps = compare(group_stats(trials), trials)
    got = [(c.axis, c.kind, c.within, c.group_a, c.group_b) for c in cmps]
    assert got == [
        ("init", "pretrained - random", "fairseq/full", "fairseq/pretrained/full",
         "fairseq/random/full"),
        ("framework", "fairseq - hf", "pretrained/full", "fairseq/pretrained/full",
         "hf/pretrained/full"),
        ("method", "full - lora[lora.r=8]", "hf/pretrained", "hf/pretrained/full",
         "hf/pretrained/lora[lora.r=8]"),
    ]  # fmt: skip
    assert cmps[0].diff == pytest.approx(15.0) and cmps[0].note.startswith("fewer than 3 pairs")
    assert cmps[1].paired and cmps[1].n_pairs == 2
    assert cmps[1].diff == pytest.approx(-2.25)  # seeds 1 and 2 only: (-2 - 2.5) / 2
    assert "paired on the 2 seeds counted in both groups" in cmps[1].note
    assert cmps[2].p_value is None and "n = 1" in cmps[2].note
    assert all(c.p_value is None or math.isfinite(c.p_value) for c in cmps)


def test_smallest_exact_p_at_thousands_of_seeds_underflows_instead_of_raising():
    """A 10,000-run sweep has groups of 2,500: 2.0**n and C(5000, 2500) do not fit a
    float; the smallest p is 0 to double precision, and unchanged at lab sizes."""
    from sweeper.summarize.stats import permutation_min_p, sign_flip_min_p

    assert sign_flip_min_p(5) == 2 / 32 and sign_flip_min_p(1) == 1.0
    assert permutation_min_p(3, 3) == 2 / 20 and permutation_min_p(2, 3) == 1 / 10
    assert sign_flip_min_p(2450) == 0.0
    assert permutation_min_p(2500, 2500) == 0.0
