"""The variance table: known answers (scipy's chi-square quantiles and bootstrap, the
closed form the bootstrap converges to), the rows built from hand-made records, and a
simulation of trials with known variance components."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace

import numpy as np
import pytest
import scipy.stats

from sweeper.selection import ACCURACY, Selection
from sweeper.summarize.compare import compare
from sweeper.summarize.latex import to_latex
from sweeper.summarize.paragraph import results_paragraph
from sweeper.summarize.records import CountedTrial
from sweeper.summarize.report import variance_metrics, write_report
from sweeper.summarize.stats import group_stats
from sweeper.summarize.tables import build_tables, to_json, to_markdown
from sweeper.summarize.terminal import to_plain
from sweeper.summarize.variance import (
    TEST_SET,
    bootstrap_variance,
    reported_flags,
    variance_interval,
    variance_rows,
)
from sweeper.trainers.predictions import CheckpointPredictions, SplitPredictions
from tests.support.summaries import holm_summary

MACRO_F1 = Selection("valid_macro_f1", "max", ("test_macro_f1", "test_accuracy"))


def trial(
    group: str,
    seed: int,
    test: float,
    source: str = "all",
    held: int = 1,
    step: int = 100,
) -> CountedTrial:
    """A counted trial of `group` whose `source` seed is `seed`, the others at `held`."""
    framework, init, rest = group.split("/", 2)
    method, _, variant = rest.partition("[")
    name = group if source == "all" else f"{group}[seed_source={source}]"
    seeds = {} if source == "all" else {s: seed if s == source else held for s in _SOURCES}
    return CountedTrial(
        run_id=f"{name}-{seed}",
        run_name=f"{name}-{seed}",
        trial_key=f"{name}-{seed}",
        group=name,
        framework=framework,
        init=init,
        method=method,
        variant=name.partition("[")[2].removesuffix("]") or variant.removesuffix("]"),
        seed=seed,
        best_valid=test,
        best_step=step,
        best_epoch=None,
        test_value=test,
        wall_time=None,
        trainable_params=None,
        valid_curve=((step, test),),
        seed_source=source,
        seeds=seeds,
        predictions=("valid", "test"),
    )


_SOURCES = ("init", "data_order", "dropout")


def split(correct: list[int] | np.ndarray, step: int = 100, last: int | None = None):
    flags = tuple(int(c) for c in correct)
    checkpoints = {"best": CheckpointPredictions(step, flags, (0.9,) * len(flags), flags)}
    if last is not None:
        checkpoints["last"] = CheckpointPredictions(last, flags, (0.9,) * len(flags), flags)
    return SplitPredictions("test", "classification", tuple(range(len(flags))), checkpoints)


# --- known answers ------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 5, 10, 40])
@pytest.mark.parametrize("confidence", [0.95, 0.9])
def test_variance_interval_is_the_chi_square_interval(n, confidence):
    s2 = 2.37
    low, high = variance_interval(s2, n, confidence)
    tail = (1 - confidence) / 2
    chi2 = scipy.stats.chi2(n - 1)
    assert low == pytest.approx((n - 1) * s2 / chi2.ppf(1 - tail), rel=1e-10)
    assert high == pytest.approx((n - 1) * s2 / chi2.ppf(tail), rel=1e-10)
    assert low < s2 < high


@pytest.mark.parametrize(("examples", "right"), [(189, 140), (200, 100), (50, 47)])
def test_bootstrap_variance_is_scipys_and_converges_to_the_closed_form(examples, right):
    """scipy.stats.bootstrap resamples the example indices; ours draws the count right
    per resample: the same distribution, so the variances agree within their
    Monte-Carlo error (sd of a variance from B resamples ~ var * sqrt(2 / B))."""
    correct = np.array([1] * right + [0] * (examples - right))
    np.random.default_rng(5).shuffle(correct)
    resamples = 9999
    ours = bootstrap_variance(correct.tolist(), np.random.default_rng(0), resamples)
    result = scipy.stats.bootstrap(
        (100.0 * correct,),
        np.mean,
        n_resamples=resamples,
        method="percentile",
        rng=np.random.default_rng(1),
    )
    theirs = float(result.standard_error) ** 2
    p = right / examples
    closed = 1e4 * p * (1 - p) / examples
    mc = closed * math.sqrt(2 / resamples)
    assert abs(ours - theirs) < 3 * math.sqrt(2) * mc
    assert abs(ours - closed) < 3 * mc
    assert abs(theirs - closed) < 3 * mc
    many = bootstrap_variance(correct.tolist(), np.random.default_rng(2), 400_000)
    assert many == pytest.approx(closed, rel=0.01)  # converges (MC sd 0.22% here)


def test_a_test_set_everyone_gets_right_has_no_bootstrap_variance():
    assert bootstrap_variance([1] * 30, np.random.default_rng(0)) == 0.0
    assert bootstrap_variance([0] * 30, np.random.default_rng(0)) == 0.0


# --- the rows -----------------------------------------------------------------------------

FP = "fairseq/pretrained/full"
HP = "hf/pretrained/full"


def test_rows_per_source_block_then_the_test_set():
    values = {
        "all": [74.0, 73.5, 75.0, 72.0],
        "init": [74.5, 74.0, 73.0],
        "dropout": [74.0, 74.5, 74.0],
        "data_order": [71.0, 76.0, 73.5],
    }
    trials = [
        trial(FP, seed, v, source, held=7)
        for source, vs in values.items()
        for seed, v in enumerate(vs, 1)
    ]
    rows = variance_rows(trials, {})
    assert [r.source for r in rows] == ["all", "init", "data_order", "dropout"]  # table order
    for row in rows:
        vs = values[row.source]
        assert row.group == FP and row.n == len(vs)
        assert row.mean == pytest.approx(statistics.mean(vs))
        assert row.std == pytest.approx(statistics.stdev(vs))
        assert row.variance == pytest.approx(statistics.variance(vs))
        low, high = variance_interval(statistics.variance(vs), len(vs))
        assert (row.variance_low, row.variance_high) == pytest.approx((low, high))
        assert (row.std_low, row.std_high) == pytest.approx((math.sqrt(low), math.sqrt(high)))
        assert row.ratio is None  # no predictions: no test-set row to compare with
    by = {r.source: r for r in rows}
    assert by["all"].held == {}
    assert by["init"].held == {"data_order": (7,), "dropout": (7,)}
    assert by["data_order"].held == {"init": (7,), "dropout": (7,)}


def test_an_ordinary_sweep_shows_its_seeds_beside_the_test_set_once_predictions_exist():
    rng = np.random.default_rng(3)
    trials = [trial(FP, seed, 0.0) for seed in (1, 2, 3)] + [trial(HP, 1, 0.0)]
    predictions = {}
    for i, t in enumerate(trials):
        correct = (rng.random(189) < 0.7).astype(int)
        trials[i] = replace(t, test_value=100 * correct.mean())
        predictions[t.run_id] = split(correct)
    assert variance_rows(trials, {}) == ()  # no block, no predictions: nothing to say
    rows = variance_rows(trials, predictions)
    assert [(r.group, r.source, r.n) for r in rows] == [
        (FP, "all", 3),
        (FP, TEST_SET, 3),
        (HP, "all", 1),
        (HP, TEST_SET, 1),
    ]
    fp_all, fp_test, hp_all, hp_test = rows
    expected = [bootstrap_variance(predictions[t.run_id].at().correct) for t in trials[:3]]
    assert fp_test.variance == pytest.approx(statistics.mean(expected), rel=1e-12)
    assert fp_test.std == pytest.approx(math.sqrt(fp_test.variance))
    assert fp_test.examples == 189 and fp_test.variance_low is None and fp_test.ratio is None
    assert fp_test.mean == pytest.approx(statistics.mean(t.test_value for t in trials[:3]))
    assert fp_all.ratio == pytest.approx(fp_all.variance / fp_test.variance)
    assert hp_all.std is None and hp_all.variance is None and hp_all.ratio is None
    assert hp_test.variance is not None
    again = variance_rows(trials, predictions)
    assert again == rows  # generators seeded by the flags: the same table every time


def test_only_the_reported_checkpoints_predictions_count():
    t1, t2, t3 = (trial(FP, seed, 50.0, step=300) for seed in (1, 2, 3))
    best_elsewhere = split([1, 0] * 10, step=200, last=300)  # reported step is the last
    assert reported_flags(t1, best_elsewhere) == best_elsewhere.at("last").correct
    neither = split([1, 1, 0, 0], step=100, last=200)
    assert reported_flags(t2, neither) is None
    rows = variance_rows([t1, t2, t3], {t1.run_id: best_elsewhere, t2.run_id: neither})
    test_row = next(r for r in rows if r.source == TEST_SET)
    assert test_row.n == 1 and test_row.examples == 20


def test_a_metric_that_is_no_mean_of_flags_has_no_test_set_row():
    trials = [trial(FP, seed, 70.0 + seed, "init") for seed in (1, 2, 3)]
    predictions = {t.run_id: split([1, 0, 1]) for t in trials}
    rows = variance_rows(trials, predictions, MACRO_F1)
    assert [r.source for r in rows] == ["init"]
    plain = [trial(FP, seed, 70.0 + seed) for seed in (1, 2, 3)]
    assert variance_rows(plain, {t.run_id: split([1, 0, 1]) for t in plain}, MACRO_F1) == ()


# --- the reports --------------------------------------------------------------------------


def _summary_with_variance():
    base = holm_summary()
    trials, predictions = [], {}
    rng = np.random.default_rng(11)
    for t in base.trials:
        for source in ("all", "data_order"):
            made = trial(t.group, t.seed or 0, t.test_value, source, step=t.best_step)
            trials.append(made)
            predictions[made.run_id] = split(rng.random(189) < 0.74, step=t.best_step)
    return replace(base, trials=trials, variance=variance_rows(trials, predictions))


def test_every_format_carries_the_table_and_none_without_one():
    summary = _summary_with_variance()
    plain, markdown = to_plain(summary), to_markdown(summary)
    data = json.loads(to_json(summary))
    latex = to_latex(summary)
    assert "\\label{tab:demo-variance}" in latex and latex.count("\\begin{table}") == 4
    for text in (plain, markdown, latex):
        assert "Where the seed-to-seed variance of test accuracy comes from" in text
    assert "data order seed alone" in plain and "test set (189 examples)" in plain
    held_in_source_order = "| data order seed alone | init=1, dropout=1 | 8 |"
    assert f"| fairseq/pretrained/full {held_in_source_order}" in markdown
    rows = data["variance"]["rows"]
    assert [(r["group"], r["source"]) for r in rows[:3]] == [
        ("fairseq/pretrained/full", "all"),
        ("fairseq/pretrained/full", "data_order"),
        ("fairseq/pretrained/full", TEST_SET),
    ]
    assert rows[1]["held"] == {"init": [1], "dropout": [1]}
    assert "chi-square" in data["variance"]["interval"]
    paragraph = results_paragraph(summary)
    row = summary.variance[1]
    assert f"{row.std:.2f} points over the data order seed alone (n = 8)" in paragraph
    assert "a new test set of 189 examples would move it by" in paragraph
    metrics = variance_metrics(summary)
    key = "summary/fairseq/pretrained/full/variance/data_order/std"
    assert metrics[key] == pytest.approx(row.std)
    assert "summary/fairseq/pretrained/full/variance/test_set/variance" in metrics
    assert [t.name for t in build_tables(summary)][-2:] == ["variance", "not_counted"]

    without = holm_summary()
    assert "variance" not in json.loads(to_json(without))
    assert "Where the seed-to-seed variance" not in to_plain(without) + to_latex(without)
    assert "variance" not in [t.name for t in build_tables(without)]
    assert variance_metrics(without) == {}


def test_the_report_folder_has_the_figure_and_the_table(tmp_path):
    written = write_report(_summary_with_variance(), tmp_path)
    names = {p.name for p in written}
    assert {"variance.png", "variance.md", "variance.csv"} <= names
    assert (tmp_path / "variance.png").read_bytes()[:4] == b"\x89PNG"
    page = (tmp_path / "report.html").read_text()
    assert "<h2>Variance. Where" in page and 'alt="variance"' in page
    csv_head = (tmp_path / "variance.csv").read_text().splitlines()[0].split(",")
    assert csv_head[:4] == ["group", "source", "n", "mean"]


# --- a simulation with known components ----------------------------------------------------

SIM_SD = {"init": 0.010, "data_order": 0.020, "dropout": 0.005}
"""Each source's effect on a trial's probability of getting an example right (sd)."""


def _simulate(rng: np.random.Generator, n: int, examples: int, base: float = 0.75):
    """One sweep of one group: `n` trials per block (all, then each source alone, the
    others held at one draw), each trial's accuracy = base + init + order + dropout
    effects, then per-example noise: each example right with that probability."""
    held = {s: rng.normal(0, sd) for s, sd in SIM_SD.items()}
    trials, predictions = [], {}
    for source in ("all", *SIM_SD):
        for seed in range(1, n + 1):
            effects = {
                s: rng.normal(0, sd) if source in ("all", s) else held[s]
                for s, sd in SIM_SD.items()
            }
            q = base + sum(effects.values())
            correct = (rng.random(examples) < q).astype(np.int8)
            made = trial(FP, seed, 100.0 * correct.mean(), source)
            trials.append(made)
            predictions[made.run_id] = split(correct)
    return trials, predictions


def test_simulated_components_are_recovered_at_the_stated_rate():
    """A block's true variance (points^2) is its sources' effect variance plus the
    per-example noise of N examples, 1e4 * (s2 + (p(1-p) - s2) / N); its 95% chi-square
    interval must cover it at 0.95 within Monte-Carlo error (3 SE), and the test-set
    row must average to the variance a new test set adds, 1e4 * E[q(1-q)] / N (times
    (N-1)/N, the plug-in bootstrap's bias)."""
    rng = np.random.default_rng(2026)
    loops, n, examples, base = 300, 5, 400, 0.75
    effect = {"all": sum(sd**2 for sd in SIM_SD.values()), **{s: sd**2 for s, sd in SIM_SD.items()}}
    covered = {source: 0 for source in effect}
    test_estimates = []
    for _ in range(loops):
        trials, predictions = _simulate(rng, n, examples, base)
        for row in variance_rows(trials, predictions, ACCURACY, resamples=999):
            if row.source == TEST_SET:
                test_estimates.append(row.variance)
                continue
            s2 = effect[row.source]
            truth = 1e4 * (s2 + (base * (1 - base) - s2) / examples)
            covered[row.source] += row.variance_low <= truth <= row.variance_high
    rate = sum(covered.values()) / (loops * len(covered))
    se = math.sqrt(0.95 * 0.05 / (loops * len(covered)))
    assert abs(rate - 0.95) < 3 * se, covered
    # E[q(1-q)] over the trials: the held draws vary q as much as the varied ones on average
    total = effect["all"]
    new_test_set = 1e4 * (base * (1 - base) - total) / examples * (examples - 1) / examples
    mean_estimate = statistics.mean(test_estimates)
    assert abs(mean_estimate - new_test_set) < 3 * statistics.stdev(test_estimates) / math.sqrt(
        len(test_estimates)
    )


def test_which_source_varied_is_no_axis_of_comparison():
    """fairseq and hf are compared within each block; the blocks of one setup are set
    beside each other in the variance table, not tested against each other."""
    trials = [
        trial(group, seed, 70.0 + seed + (group == HP), source)
        for group in (FP, HP)
        for source in ("all", "init", "data_order")
        for seed in (1, 2, 3)
    ]
    groups = group_stats(trials, [], (0.0, 100.0))
    found = [(c.axis, c.within) for c in compare(groups, trials)]
    assert found == [
        ("framework", "pretrained/full"),
        ("framework", "pretrained/full[seed_source=data_order]"),
        ("framework", "pretrained/full[seed_source=init]"),
    ]
