"""Expected best validation score vs search budget (Dodge et al. 2019), and the
confirm-on-a-tuning-seed note."""

from __future__ import annotations

import itertools
import statistics

import pytest
from test_search_select import _curve
from test_search_select import _run as search_run
from test_summarize_stats import trial

from sweeper.record_names import Stage, Status
from sweeper.summarize.budget import expected_best, expected_best_curve
from sweeper.summarize.core import _tuned_seeds
from sweeper.summarize.figures import BUDGET_FILE, write_figures
from sweeper.summarize.records import RunRecord, Summary
from sweeper.summarize.search import search_groups
from sweeper.summarize.tables import build_tables


def test_hand_computed_case():
    """v = 60, 70, 80: one trial 70 on average; two: the max of {60,70}, {60,80},
    {70,80} = (70 + 80 + 80) / 3; all three: 80."""
    curve = expected_best_curve([70.0, 60.0, 80.0])
    assert [n for n, _ in curve] == [1, 2, 3]
    assert [v for _, v in curve] == pytest.approx([70.0, 230.0 / 3, 80.0])


@pytest.mark.parametrize("mode", ["max", "min"])
def test_equals_the_mean_over_every_subset(mode):
    values = [61.5, 70.0, 70.0, 64.25, 79.0, 55.0, 72.5]
    pick = max if mode == "max" else min
    for n in range(1, len(values) + 1):
        subsets = itertools.combinations(values, n)
        assert expected_best(values, n, mode) == pytest.approx(
            statistics.fmean(pick(s) for s in subsets)
        )


def test_curve_is_monotone_and_bounded():
    values = [0.3, 0.9, 0.5, 0.7, 0.1]
    best = [v for _, v in expected_best_curve(values)]
    assert best == sorted(best) and best[-1] == max(values)
    assert best[0] == pytest.approx(statistics.fmean(values))
    assert expected_best_curve([]) == ()
    with pytest.raises(ValueError):
        expected_best(values, 6)


def _searched() -> Summary:
    """Two searched groups: pretrained's finished trials peak at 60, 70, 80 (an
    early-stopped 95 and a failed 99 stay out of its curve), random's at 50."""
    runs = [
        search_run("a", 1, 1e-4),
        search_run("b", 2, 2e-4),
        search_run("c", 3, 3e-4),
        search_run("stopped", 4, 4e-4, Status.EARLY_STOPPED),
        search_run("failed", 5, 5e-4, Status.FAILED, mlflow="FAILED"),
        search_run("r", 6, 1e-4, group="hf/random/full"),
    ]
    best = {"a": 60.0, "b": 80.0, "c": 70.0, "stopped": 95.0, "failed": 99.0, "r": 50.0}
    histories = {k: {"valid_accuracy": _curve(v - 5, v, v - 1)} for k, v in best.items()}
    groups = search_groups(runs, histories, "valid_accuracy", "max", "demo")
    return Summary("demo", "1", "sqlite:///x", "demo", "p", [], [], [], [], search=groups)


def test_search_groups_carry_the_curve_of_their_finished_trials():
    pretrained, random = _searched().search
    assert pretrained.finished == 3 and pretrained.trials == 5
    assert [n for n, _ in pretrained.expected_best] == [1, 2, 3]
    assert [v for _, v in pretrained.expected_best] == pytest.approx([70.0, 230.0 / 3, 80.0])
    assert random.expected_best == ((1, 50.0),)
    assert pretrained.to_dict()["expected_best"][1] == [2, pytest.approx(230.0 / 3)]


def test_budget_table_follows_the_search_table_and_the_figure_is_drawn(tmp_path):
    summary = _searched()
    tables = build_tables(summary)
    assert [t.name for t in tables[:2]] == ["search", "search_budget"]
    budget = tables[1]
    assert "unbiased" in budget.title and "Dodge" in budget.title
    assert [(r["group"], r["trials"]) for r in budget.rows] == [
        ("hf/pretrained/full", 1),
        ("hf/pretrained/full", 2),
        ("hf/pretrained/full", 3),
        ("hf/random/full", 1),
    ]
    assert budget.text_rows(None)[1] == ["hf/pretrained/full", "2", "76.67"]
    (png,) = write_figures(summary, tmp_path)  # no counted trial: the budget figure only
    assert png.name == BUDGET_FILE and png.read_bytes()[:4] == b"\x89PNG"


def _run(group: str, seed: int, stage: str) -> RunRecord:
    return RunRecord(
        run_id=f"{stage}{seed}", run_name="", parent_run_id=None, mlflow_status="FINISHED",
        start_time=0, end_time=0, role="trial", sweep="s", trial_key=f"k{stage}{seed}",
        group=group, seed=seed, init="random", framework="hf", method="full", stage=stage,
        status="finished", error=None, trainable_params=None,
    )  # fmt: skip


def test_confirming_on_a_tuning_seed_is_flagged():
    group = "hf/random/full"
    runs = [_run(group, 1, Stage.SEARCH), _run(group, 1, Stage.CONFIRM)]
    (note,) = _tuned_seeds(runs, [trial(group, 1, 70.0), trial(group, 2, 71.0)])
    assert note.startswith("confirm seed(s) [1] were also tuning seeds")
    assert _tuned_seeds(runs, [trial(group, 2, 71.0)]) == []
    assert _tuned_seeds(runs, [trial("hf/pretrained/full", 1, 71.0)]) == []
