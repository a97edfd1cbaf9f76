"""A sweep selected on another metric than accuracy (`select:`): events, reports,
best-checkpoint metrics and the summary's tables follow it; a classification sweep's
record reads as before."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sweeper import record_names
from sweeper.selection import ACCURACY, Selection, best_metrics, metric_mode
from sweeper.summarize.compare import compare
from sweeper.summarize.decide import decide
from sweeper.summarize.records import CountedTrial, Point, Summary
from sweeper.summarize.select import best_checkpoint, history_keys
from sweeper.summarize.stats import group_stats
from sweeper.summarize.tables import build_tables, to_json
from sweeper.trainers.base import Checkpoints
from sweeper.trainers.events import MetricEvent, best_validation
from sweeper.trainers.runner import TrialResult
from sweeper.tune.trainable import POINTS, Reporter, event_points
from tests.unit.test_summarize_select import BASE

LM = Selection("valid_loss", "min", ("test_exact_match", "test_perplexity"))


def _lm(step: int, split: str, loss: float, match: float) -> MetricEvent:
    metrics = {"perplexity": round(2.718281828**loss, 4), "exact_match": match}
    return MetricEvent(step=step, epoch=step / 10, split=split, loss=loss, metrics=metrics)  # type: ignore[arg-type]


def test_a_classifier_event_is_written_as_before_and_other_metrics_round_trip():
    plain = MetricEvent(step=1, epoch=0.1, split="valid", loss=0.5, accuracy=70.0)
    assert "metrics" not in json.loads(plain.to_json())
    event = _lm(10, "valid", 0.7, 40.0)
    assert MetricEvent.from_dict(json.loads(event.to_json())) == event
    assert list(event.values()) == ["loss", "accuracy", "exact_match", "perplexity"]
    assert not replace(event, metrics={"perplexity": float("inf")}).is_finite()


def test_other_metrics_are_logged_under_their_split():
    names = [k for _, k, _ in event_points(_lm(10, "valid", 0.7, 40.0))]
    assert names == ["valid_loss", "valid_exact_match", "valid_perplexity", "epoch", "wall_time"]
    names = [k for _, k, _ in event_points(_lm(10, "test", 0.7, 40.0))]
    assert names == ["test_loss", "test_exact_match", "test_perplexity"]


def test_best_validation_follows_the_selection_mode():
    events = [_lm(10, "valid", 0.9, 50.0), _lm(20, "valid", 0.6, 30.0), _lm(30, "valid", 0.6, 20.0)]
    events += [_lm(step, "test", 1.0, 10.0 * step) for step in (10, 20, 30)]
    best, test = best_validation(events, LM)
    assert (best.step, test.step) == (20, 20)  # lowest loss; the tie goes to the earliest
    assert best_validation(events) is None


def test_the_reporter_sends_every_metric_and_the_selected_best(tmp_path: Path):
    sent: list[dict] = []
    reporter = Reporter(sent.append, node="n1", selection=LM)
    for event in (_lm(10, "valid", 0.9, 50.0), _lm(10, "test", 0.95, 45.0)):
        reporter.on_event(event)
    assert sent[-1]["valid_exact_match"] == 50.0 and sent[-1]["test_perplexity"] > 1
    assert sent[-1]["valid_accuracy"] is None  # the progress view asks; none measured
    for event in (_lm(20, "valid", 0.5, 40.0), _lm(20, "test", 0.55, 42.0)):
        reporter.on_event(event)
    reporter.finish(TrialResult(tmp_path, [], Checkpoints(None, None), 3.0, None))
    best = {k: (s, v) for s, k, v in sent[-1][POINTS] if k.startswith("best_")}
    assert list(best) == list(LM.best_names())
    assert best["best_valid_loss"] == (20, 0.5)
    assert best["best_test_exact_match"] == (20, 42.0)
    assert best["best_step"] == (20, 20)


def test_selection_names_and_tag_round_trip():
    assert ACCURACY.best_names() == record_names.BEST_METRIC_NAMES
    assert LM.best_names()[:3] == (
        "best_valid_loss",
        "best_test_exact_match",
        "best_test_perplexity",
    )
    assert Selection.from_json(LM.to_json()) == LM
    assert Selection.from_json(None) == ACCURACY
    assert (metric_mode("test_perplexity"), metric_mode("test_exact_match")) == ("min", "max")
    assert best_metrics(0.5, {"test_exact_match": 42.0}, 20, 2.0, LM) == {
        "best_valid_loss": 0.5,
        "best_test_exact_match": 42.0,
        "best_step": 20.0,
        "best_epoch": 2.0,
    }


def _history(loss: list[tuple[int, float]], match: dict[int, float], ppl: dict[int, float]):
    def points(pairs):
        return tuple(Point(step, i, value) for i, (step, value) in enumerate(pairs))

    return {
        "valid_loss": points(loss),
        "test_exact_match": points(match.items()),
        "test_perplexity": points(ppl.items()),
    }


def _trial(group: str, seed: int, match: float, ppl: float) -> CountedTrial:
    _, init, method = group.split("/")
    run = replace(BASE, run_id=f"r{seed}{init}{method}", group=group, seed=seed, init=init)
    run = replace(run, method=method, trial_key=f"k{seed}{init}{method}")
    found = best_checkpoint(run, _history([(10, 1.0), (20, 0.7)], {20: match}, {20: ppl}), LM)
    assert isinstance(found, CountedTrial)
    return found


def test_the_summary_selects_reports_and_compares_by_the_selection():
    assert history_keys(LM) == ("valid_loss", "test_exact_match", "test_perplexity", "epoch")
    trials = [_trial("hf/pretrained/full", s, 60.0 + s, 3.0 - s / 10) for s in (1, 2, 3)]
    trials += [_trial("hf/random/full", s, 20.0 + 2 * s, 9.0 + s) for s in (1, 2, 3)]
    assert (trials[0].best_step, trials[0].best_valid) == (20, 0.7)
    assert trials[0].other_tests == {"test_perplexity": 2.9}
    groups = group_stats(trials)
    assert groups[0].other_means["test_perplexity"] == pytest.approx(2.8)
    comparisons = decide(compare(groups, trials), trials, 0.05, metric_mode(LM.primary))
    summary = Summary("e", "1", "sqlite://", "lm", None, trials, groups, comparisons, [])
    summary = replace(summary, selection=LM)
    table1, table2, table3, _ = build_tables(summary)
    headers = [c.header for c in table1.columns]
    assert headers[3] == "best_valid_loss" and "test_perplexity" in headers
    assert table1.text_rows()[0][headers.index("test_exact_match")] == "61.00"
    assert "Mean test_perplexity" in [c.header for c in table2.columns]
    assert table2.title.startswith("Table 2. test_exact_match per group")
    data = json.loads(to_json(summary))
    assert data["selection"]["metric"] == "valid_loss"
    assert data["trials"][0]["test_exact_match"] == 61.0
    assert data["groups"][0]["test_perplexity_mean"] == pytest.approx(2.8)
    assert "exact_match" in table3.title


def test_a_lower_is_better_metric_decides_for_the_lower_group():
    low = [_trial("hf/pretrained/full", s, 3.0 - s / 10, 0.0) for s in (1, 2, 3)]
    high = [_trial("hf/random/full", s, 9.0 + s, 0.0) for s in (1, 2, 3)]
    groups = group_stats([*low, *high])
    (comparison,) = decide(compare(groups, [*low, *high]), [*low, *high], 0.05, "min")
    assert comparison.diff < 0 and comparison.decision == "hf/pretrained/full better"
    (comparison,) = decide(compare(groups, [*low, *high]), [*low, *high], 0.05, "max")
    assert comparison.decision == "hf/random/full better"
