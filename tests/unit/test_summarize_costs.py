"""The cost ledger in the summary: sums of the runs' recorded seconds per group and per
sweep, "seeds needed" priced, and every format printing the same cells (hand-made
records: the arithmetic, not a store)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sweeper import record_names as rn
from sweeper.record_names import Stage
from sweeper.summarize.cells import amount
from sweeper.summarize.costs import Prices, Spend, needed, per_trial
from sweeper.summarize.html import to_html
from sweeper.summarize.latex import to_latex
from sweeper.summarize.paragraph import results_paragraph
from sweeper.summarize.records import RunRecord, Summary
from sweeper.summarize.report import cost_metrics
from sweeper.summarize.spend import (
    sweep_cost,
    sweep_line,
    until_decided_lines,
    with_group_costs,
    with_needed,
)
from sweeper.summarize.tables import build_tables, to_json, to_markdown
from sweeper.summarize.terminal import to_plain
from tests.support.summaries import FP, GROUPS, HP, holm_summary

USD = Prices(cpu_hour=0.04, gpu_hour=2.5, currency="USD")


def _run(group: str, seed: int, cpu: float, gpu: float = 0.0, **fields) -> RunRecord:
    """A trial run whose ledger says it held `cpu` CPU-seconds (`gpu` GPU-seconds) over
    one attempt, or over two with the first lost (`lost`: its CPU-seconds)."""
    lost = fields.pop("lost", 0.0)
    latest = {
        rn.METRIC_COST_ATTEMPTS: 2.0 if lost else 1.0,
        rn.METRIC_COST_LOST_ATTEMPTS: 1.0 if lost else 0.0,
        rn.METRIC_COST_CPU: cpu,
        rn.METRIC_COST_GPU: gpu,
        rn.METRIC_COST_LOST_CPU: lost,
        rn.METRIC_COST_LOST_GPU: 0.0,
        rn.METRIC_COST_CPU_TIME: cpu / 2,
        rn.METRIC_COST_GPU_TIME: 0.0,
    }
    base = RunRecord(
        run_id=f"{group}-{seed}", run_name="", parent_run_id=None, mlflow_status="FINISHED",
        start_time=0, end_time=0, role="trial", sweep="demo", trial_key=f"{group}-{seed}",
        group=group, seed=seed, init="random", framework="hf", method="full",
        stage=Stage.GRID, status="finished", error=None, trainable_params=None, latest=latest,
    )  # fmt: skip
    return replace(base, **fields)


def _runs(gpu: bool) -> list[RunRecord]:
    """8 counted runs per group (360 CPU-s each, FP's seed 1 lost a 90 s attempt), a
    failed FP run, a search-stage run and a run from before the ledger."""
    runs = [
        _run(name, seed, 360.0 + (90.0 if (name, seed) == (FP, 1) else 0.0),
             gpu=180.0 if gpu else 0.0, lost=90.0 if (name, seed) == (FP, 1) else 0.0)
        for name in GROUPS for seed in range(1, 9)
    ]  # fmt: skip
    runs.append(_run(FP, 9, 45.0, lost=45.0, mlflow_status="FAILED", status="failed"))
    runs.append(_run(HP, 100, 30.0, stage=Stage.SEARCH))
    runs.append(replace(_run(HP, 10, 0.0), latest={}))  # recorded before the ledger
    return runs


def _summary(gpu: bool = False, prices: Prices | None = None) -> Summary:
    base = holm_summary()
    cost = sweep_cost(_runs(gpu), prices)
    groups = with_group_costs(base.groups, cost)
    return replace(base, groups=groups, comparisons=with_needed(base.comparisons, groups, cost),
                   cost=cost)  # fmt: skip


def test_the_sweep_and_each_group_hold_the_sum_of_their_runs_recorded_seconds():
    cost = sweep_cost(_runs(gpu=False), None)
    assert cost is not None and not cost.gpu
    assert cost.total.runs == 34  # the run without a ledger adds nothing
    assert cost.total.cpu_seconds == 32 * 360.0 + 90.0 + 45.0 + 30.0
    assert cost.total.attempts == 32 + 1 + 2 + 1 and cost.total.lost_attempts == 2
    assert cost.total.lost_cpu_seconds == 135.0
    assert cost.groups[FP].cpu_seconds == 8 * 360.0 + 90.0 + 45.0  # failed run included
    assert cost.groups[HP].cpu_seconds == 8 * 360.0  # the search run is the sweep's only
    assert cost.search is not None and cost.search.cpu_seconds == 30.0
    assert sweep_cost([replace(_run(FP, 1, 1.0), latest={})], None) is None


def test_table_2_gives_each_groups_hours_and_price():
    summary = _summary(gpu=True, prices=USD)
    fp = next(g for g in summary.groups if g.group == FP)
    assert fp.cpu_hours == pytest.approx((8 * 360.0 + 135.0) / 3600)
    assert fp.gpu_hours == pytest.approx(8 * 180.0 / 3600)
    assert fp.cost == pytest.approx(USD.of(8 * 360.0 + 135.0, 8 * 180.0))
    table2 = next(t for t in build_tables(summary) if t.name == "table2")
    headers = [c.header for c in table2.columns]
    assert {"CPU-h", "GPU-h", "Cost (USD)"} <= set(headers)
    row = table2.text_rows()[[g.group for g in summary.groups].index(FP)]
    assert row[headers.index("CPU-h")] == amount(fp.cpu_hours) == "0.8375"
    assert row[headers.index("Cost (USD)")] == amount(fp.cost)


def test_no_gpu_no_prices_no_ledger_no_columns():
    table2 = next(t for t in build_tables(_summary()) if t.name == "table2")
    headers = [c.header for c in table2.columns]
    assert "CPU-h" in headers and "GPU-h" not in headers and "Cost (USD)" not in headers
    plain = next(t for t in build_tables(holm_summary()) if t.name == "table2")
    assert "CPU-h" not in [c.header for c in plain.columns]
    assert "Cost:" not in to_plain(holm_summary())


def test_seeds_needed_comes_with_trials_hours_and_money():
    summary = _summary(gpu=True, prices=USD)
    undecided = next(c for c in summary.comparisons if c.seeds_needed == 41)  # FP vs HP, 8 each
    rate_fp, rate_hp = (8 * 360.0 + 135.0) / 8, 360.0
    assert undecided.needed_trials == 2 * (41 - 8)
    assert undecided.needed_cpu_hours == pytest.approx(33 * (rate_fp + rate_hp) / 3600)
    assert undecided.needed_gpu_hours == pytest.approx(2 * 33 * 180.0 / 3600)
    cpu, gpu = 33 * (rate_fp + rate_hp), 2 * 33 * 180.0
    assert undecided.needed_cost == pytest.approx(USD.of(cpu, gpu))
    decided = [c for c in summary.comparisons if c.seeds_needed is None]
    assert decided and all(c.needed_trials is None for c in decided)


def test_every_format_prints_the_same_cost_cells():
    summary = _summary(gpu=True, prices=USD)
    undecided = next(c for c in summary.comparisons if c.seeds_needed == 41)
    cell = (
        f"41 (+66 trials, {amount(undecided.needed_cpu_hours)} CPU-h, "
        f"{amount(undecided.needed_gpu_hours)} GPU-h, {amount(undecided.needed_cost)} USD)"
    )
    comparisons = next(t for t in build_tables(summary) if t.name == "comparisons")
    assert cell in [row[-2] for row in comparisons.text_rows()]
    line = sweep_line(summary)
    assert line is not None and line.startswith(
        f"Cost: {amount(summary.cost.total.cpu_hours)} CPU-hours, "
        f"{amount(summary.cost.total.gpu_hours)} GPU-hours"
    )
    for text in (to_markdown(summary), to_plain(summary), to_html(summary)):
        assert cell in text and line in text
    assert cell in to_latex(summary)  # the preamble line is a LaTeX comment there
    assert "(+66 trials, " in results_paragraph(summary)
    assert '"needed_trials": 66' in to_json(summary)


def test_the_parent_run_gets_the_sweeps_totals_under_the_trials_names():
    summary = _summary(prices=USD)
    metrics = cost_metrics(summary)
    assert metrics[rn.METRIC_COST_CPU] == summary.cost.total.cpu_seconds
    assert metrics[rn.METRIC_COST_ATTEMPTS] == 36
    assert metrics[f"summary/{FP}/cpu_seconds"] == 8 * 360.0 + 135.0
    assert metrics[f"summary/{FP}/cost"] == pytest.approx(USD.of(8 * 360.0 + 135.0, 0))
    assert cost_metrics(holm_summary()) == {}


def test_until_decided_reports_what_it_spent_and_what_it_saved():
    summary = _summary(prices=USD)
    ran = {name: 8 for name in GROUPS}
    ran[FP] = 9  # its failed run is a key too
    spent, saved = until_decided_lines(summary, max_seeds=10, ran=ran)
    assert spent.startswith(f"spent: {amount(summary.cost.total.cpu_hours)} CPU-hours")
    rate = {name: 360.0 for name in GROUPS} | {FP: (8 * 360.0 + 135.0) / 8}
    seconds = sum((10 - ran[name]) * rate[name] for name in GROUPS)
    assert saved.startswith("saved against every group at --max-seeds 10: 7 trials, about ")
    assert f"{amount(seconds / 3600)} CPU-hours" in saved


def test_the_arithmetic_on_its_own():
    spend = Spend.of_run({rn.METRIC_COST_ATTEMPTS: 3, rn.METRIC_COST_CPU: 30.0})
    assert spend is not None and (spend.attempts, spend.cpu_seconds, spend.gpu_seconds) == (
        3,
        30,
        0,
    )
    assert Spend.total([spend, spend]).cpu_seconds == 60.0 and Spend.total([]).runs == 0
    assert per_trial(Spend(runs=2, cpu_seconds=90.0), 3) == (30.0, 0.0)
    assert per_trial(Spend(), 3) is None and per_trial(spend, 0) is None
    rates = {"a": (10.0, 1.0), "b": None}
    assert needed(5, {"a": 3, "b": 5}, rates) == needed(5, {"a": 3}, rates)
    assert needed(5, {"a": 3}, rates).trials == 2  # type: ignore[union-attr]
    assert needed(6, {"a": 3, "b": 5}, rates) is None  # b needs a trial and has no rate
    assert USD.of(3600.0, 3600.0) == pytest.approx(2.54)
    assert amount(1234.5) == "1,234.50" and amount(0.01234) == "0.0123"


def test_a_summary_without_the_spec_reads_the_prices_the_sweep_run_recorded(tmp_path):
    import json

    from mlflow import MlflowClient

    from sweeper.spec.load import validate_mapping
    from sweeper.summarize import SummaryRequest, summarize
    from sweeper.tracking.sweep_run import open_sweep_run, record_sweep
    from tests.support.specs import minimal_spec

    spec = validate_mapping(
        {**minimal_spec(), "cost": {"gpu_hour": 2.5, "currency": "EUR"}}, "s.yaml", tmp_path
    )
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment(spec.name, artifact_location=tmp_path.as_uri())
    parent = open_sweep_run(client, experiment, spec)
    (tmp_path / "s.yaml").write_text("name: t\n")
    record_sweep(client, parent, spec, tmp_path / "s.yaml", trials=1)
    assert json.loads(client.get_run(parent).data.tags[rn.TAG_COST])["currency"] == "EUR"
    tags = {rn.TAG_ROLE: rn.ROLE_TRIAL, rn.TAG_SWEEP: spec.name, "mlflow.parentRunId": parent}
    trial = client.create_run(experiment, tags=tags).info.run_id
    client.log_metric(trial, rn.METRIC_COST_ATTEMPTS, 1.0, step=1)
    client.log_metric(trial, rn.METRIC_COST_GPU, 7200.0, step=1)
    summary = summarize(SummaryRequest(spec.name, f"sqlite:///{tmp_path / 'mlflow.db'}"))  # no spec
    assert summary.cost is not None and summary.cost.prices == Prices(0.0, 2.5, "EUR")
    assert summary.cost.money(summary.cost.total) == pytest.approx(5.0)
    unpriced = summarize(
        SummaryRequest(spec.name, f"sqlite:///{tmp_path / 'mlflow.db'}", prices=None)
    )
    assert unpriced.cost is not None and unpriced.cost.prices is None
