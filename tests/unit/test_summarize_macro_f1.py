"""`summarize --metric macro_f1` on a fake store: the tables, statistics and comparisons
are built on macro-F1, each trial's best checkpoint is picked by `valid_macro_f1`, and
the sweep's other reported metric (test accuracy) stays beside it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from sweeper import record_names
from sweeper.cli.main import main
from sweeper.selection import ACCURACY, Selection
from sweeper.summarize.core import _summarize
from sweeper.summarize.records import Point, RunRecord
from sweeper.summarize.request import SummaryRequest
from sweeper.summarize.tables import build_tables
from tests.unit.test_summarize_select import BASE

STEPS = (10, 20, 30)


def _points(values: Sequence[float]) -> tuple[Point, ...]:
    return tuple(
        Point(step, i, value) for i, (step, value) in enumerate(zip(STEPS, values, strict=True))
    )


def _history(seed: int, init: str) -> dict[str, tuple[Point, ...]]:
    """Accuracy peaks at step 30, macro-F1 at step 20 (a majority-class drift: more right
    answers, fewer of the small class); pretrained scores 20 points above random."""
    shift = (20.0 if init == "pretrained" else 0.0) + seed / 2
    return {
        record_names.METRIC_VALID_ACC: _points([60 + shift, 65 + shift, 70 + shift]),
        record_names.METRIC_TEST_ACC: _points([59 + shift, 64 + shift, 69 + shift]),
        record_names.METRIC_VALID_MACRO_F1: _points([40 + shift, 55 + shift, 45 + shift]),
        record_names.METRIC_TEST_MACRO_F1: _points([41 + shift, 52 + shift, 44 + shift]),
        record_names.METRIC_EPOCH: _points([1.0, 2.0, 3.0]),
    }


class FakeSource:
    """A store holding a parent run and 2 inits × 3 seeds of HF trials."""

    uri = "fake://store"

    def __init__(self) -> None:
        self.records: list[RunRecord] = [
            replace(BASE, run_id="p", role=record_names.ROLE_SWEEP, trial_key=None, group="")
        ]
        self.history: dict[str, dict[str, tuple[Point, ...]]] = {}
        for init in ("pretrained", "random"):
            for seed in (1, 2, 3):
                run_id = f"{init}{seed}"
                self.records.append(
                    replace(
                        BASE,
                        run_id=run_id,
                        run_name=f"hf-{init}-full-s{seed}",
                        trial_key=run_id,
                        group=f"hf/{init}/full",
                        seed=seed,
                        init=init,
                        start_time=len(self.records),
                    )
                )
                self.history[run_id] = _history(seed, init)

    def experiment(self, name: str) -> tuple[str, str]:
        return "1", name

    def runs(self, experiment_id: str) -> list[RunRecord]:
        return list(self.records)

    def tags(self, run_id: str) -> dict[str, str]:
        return {}

    def histories(self, run_ids: Sequence[str], keys: Sequence[str]):
        return {r: {k: self.history[r][k] for k in keys if k in self.history[r]} for r in run_ids}


def _summary(metric: str | None):
    return _summarize(FakeSource(), SummaryRequest("demo", "fake://store", metric=metric))


def test_the_metric_re_aims_the_selection():
    assert ACCURACY.on("accuracy") == ACCURACY
    assert ACCURACY.on("macro_f1") == Selection(
        "valid_macro_f1", "max", ("test_macro_f1", "test_accuracy")
    )
    assert ACCURACY.on("valid_loss") == Selection(
        "valid_loss", "min", ("test_loss", "test_accuracy")
    )


def test_summarize_metric_macro_f1_builds_tables_and_comparisons_on_it():
    by_accuracy, by_f1 = _summary(None), _summary("macro_f1")
    assert by_accuracy.selection == ACCURACY
    assert {t.best_step for t in by_accuracy.trials} == {30}
    assert by_f1.selection == ACCURACY.on("macro_f1")
    assert any("the trainers stored the ones valid_accuracy picks" in n for n in by_f1.notes)
    assert not any("--metric" in n for n in by_accuracy.notes)
    assert {t.best_step for t in by_f1.trials} == {20}
    row = next(t for t in by_f1.trials if t.run_id == "random1")
    assert (row.best_valid, row.test_value) == (55.5, 52.5)
    assert row.other_tests == {"test_accuracy": 64.5}  # accuracy at the macro-F1 best step
    groups = {g.group: g for g in by_f1.groups}
    assert groups["hf/random/full"].mean == pytest.approx(53.0)
    assert groups["hf/random/full"].other_means["test_accuracy"] == pytest.approx(65.0)
    (comparison,) = by_f1.comparisons
    assert (comparison.group_a, comparison.group_b) == ("hf/pretrained/full", "hf/random/full")
    assert (comparison.mean_a, comparison.mean_b) == (pytest.approx(73.0), pytest.approx(53.0))
    table1, table2, table3, _ = build_tables(by_f1)
    assert table2.title.startswith("Table 2. test_macro_f1 per group")
    assert "macro_f1" in table3.title
    headers = [c.header for c in table1.columns]
    assert "best_valid_macro_f1" in headers and "test_accuracy" in headers


def test_an_unknown_metric_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(
            ["summarize", "--experiment", "e", "--tracking-uri", "sqlite:///x.db", "--metric", "f2"]
        )
    assert exc.value.code == 2
    assert "--metric f2: no trainer measures it; one of loss, accuracy, macro_f1" in (
        capsys.readouterr().err
    )
