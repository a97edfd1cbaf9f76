"""`summarize(request)`: the one function that turns a sweep's record into a Summary.

Every summary enters here with a `SummaryRequest` (`sweeper.summarize.request`):
`sweeper summarize`, the closing report of `sweeper run` and its `--until-decided`
looks alike. The steps are separate so each rule can be tested on hand-made records:
reading the sweep's runs and picking the counted trials (`sweep_runs.read_sweep`),
computing Table 2 and the comparisons from them (here), rendering (`tables`,
`terminal`, `report`).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from sweeper import record_names
from sweeper.record_names import Stage
from sweeper.selection import base_name, metric_mode
from sweeper.summarize.compare import compare
from sweeper.summarize.costs import Prices
from sweeper.summarize.decide import decide, with_aso
from sweeper.summarize.example_reader import read_predictions
from sweeper.summarize.mlflow_reader import SummarizeError, open_client
from sweeper.summarize.records import (
    Comparison,
    CountedTrial,
    GroupStats,
    NotCounted,
    RunRecord,
    SequentialPlan,
    Summary,
)
from sweeper.summarize.request import SummaryRequest
from sweeper.summarize.resolution import with_resolution, with_test_set
from sweeper.summarize.search import load_search
from sweeper.summarize.select import by_step
from sweeper.summarize.sequential import decide_sequential
from sweeper.summarize.source import MlflowSource, RunSource, SqliteReadFailed, open_source
from sweeper.summarize.spend import sweep_cost, with_group_costs, with_needed
from sweeper.summarize.stats import TALLIED, Bounds, group_stats
from sweeper.summarize.sweep_runs import SweepRuns, read_sweep
from sweeper.summarize.variance import variance_rows

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from sweeper.trainers.predictions import SplitPredictions


T = TypeVar("T")


def summarize(
    request: SummaryRequest, client: MlflowClient | None = None, history_path: str = "auto"
) -> Summary:
    """The summary `request` asks for (its fields say what each changes).

    `client` reads through an open MlflowClient (otherwise a SQLite store is read with
    SQL and a tracking server over REST, see `sweeper.summarize.source`);
    `history_path` forces one of the client's ways of reading metric histories
    (`sqlite`, `bulk`, `server`, `per_run`; `sweeper.summarize.mlflow_reader`). A sweep
    whose parent run holds a sequential plan is decided by
    `sweeper.summarize.sequential` at the plan's alpha, any other by
    `sweeper.summarize.decide`. Best checkpoints come from the counted runs' own
    best-checkpoint metrics where they allow (`sweep_runs`): the trials' validation
    curves, which only the figures draw, are then absent until `with_curves` reads
    them. Raises SummarizeError for input the user must fix.
    """

    def read(source: RunSource) -> Summary:
        if history_path != "auto" and isinstance(source, MlflowSource):
            source = MlflowSource(source.client, history_path)
        return _summarize(source, request)

    return _read(request.tracking_uri, client, read)


def _read(uri: str, client: MlflowClient | None, read: Callable[[RunSource], T]) -> T:
    """`read` on the store at `uri` as `open_source` opens it; a locked or damaged
    SQLite file is read again through MLflow's client, which says what is wrong."""
    try:
        return read(open_source(uri, client))
    except SqliteReadFailed:
        return read(open_source(uri, open_client(uri)))


def _summarize(source: RunSource, request: SummaryRequest) -> Summary:
    """Read the sweep, then compute its groups, comparisons and costs."""
    found = read_sweep(source, request)
    trials, not_counted, selection = found.trials, found.not_counted, found.selection
    value_range, difference_range = metric_ranges(selection.primary)
    groups = group_stats(trials, not_counted, value_range)
    notes = [*found.notes, *_trial_notes(found, groups)]
    counted = {t.run_id for t in trials}
    parent = _pick_parent(found.parents, [r for r in found.candidates if r.run_id in counted])
    if parent is None:
        notes.append(f"no parent run tagged {record_names.TAG_ROLE}={record_names.ROLE_SWEEP}")
    elif len(found.parents) > 1:
        notes.append(f"{len(found.parents)} parent runs; the report goes to {parent.run_id}")
    plan = _plan(parent)
    margin = request.margin
    if margin is None and plan is not None:
        margin = plan.margin  # the --until-decided plan's
    client = source.client if isinstance(source, MlflowSource) else None
    predictions = read_predictions(source.uri, trials, client=client)
    comparisons = _comparisons(request, found, groups, plan, margin, difference_range, predictions)
    prices = _recorded_prices(parent) if isinstance(request.prices, str) else request.prices
    cost = sweep_cost([r for r in found.runs if r.role == record_names.ROLE_TRIAL], prices)
    groups = with_group_costs(groups, cost)
    comparisons = with_needed(comparisons, groups, cost)
    return Summary(
        experiment=found.experiment,
        experiment_id=found.experiment_id,
        tracking_uri=source.uri,
        sweep=found.sweep,
        parent_run_id=parent.run_id if parent else None,
        trials=trials,
        groups=groups,
        comparisons=comparisons,
        not_counted=not_counted,
        notes=notes,
        search=load_search(source, found.runs, parent.run_id if parent else None, found.sweep),
        unmarked=tuple(
            r.run_id
            for r in found.candidates
            if r.run_id in counted
            and record_names.METRIC_BEST_PREFIX + selection.primary not in r.latest
        ),
        logged_digest=parent.report_digest if parent else None,
        selection=selection,
        plan=plan,
        margin=margin,
        cost=cost,
        variance=variance_rows(trials, predictions, selection),
        test_predictions=predictions,
        population=request.population,
    )


def _comparisons(
    request: SummaryRequest,
    found: SweepRuns,
    groups: list[GroupStats],
    plan: SequentialPlan | None,
    margin: float | None,
    difference_range: Bounds | None,
    predictions: dict[str, SplitPredictions],
) -> list[Comparison]:
    """Every comparison, with what its test set can resolve where its trials hold test
    predictions, decided by the recorded sequential plan's rule, else by the fixed-seed
    rule at the request's alpha (by the seeds x examples interval with `population`);
    with ASO when asked."""
    trials = found.trials
    mode = metric_mode(found.selection.primary)
    alpha = request.alpha if plan is None else plan.alpha
    comparisons = compare(groups, trials, alpha, difference_range)
    comparisons = with_test_set(
        comparisons, trials, predictions, found.selection.primary, difference_range
    )
    if plan is None:
        comparisons = decide(
            comparisons, trials, alpha, mode, margin, difference_range, request.population
        )
    else:
        if request.population:
            raise SummarizeError(
                "--population decides comparisons of seeds fixed in advance; this sweep's "
                "seeds were added until decided, and its recorded plan's rule decides"
            )
        seed_order = sorted({t.seed for t in trials if t.seed is not None})
        comparisons = decide_sequential(
            comparisons, trials, plan, seed_order, margin, difference_range, mode
        )
    comparisons = with_resolution(comparisons, request.population)
    return with_aso(comparisons, trials) if request.aso else comparisons


def _trial_notes(found: SweepRuns, groups: Sequence[GroupStats]) -> list[str]:
    """The notes about the counted trials and the groups they make."""
    counted = {t.run_id for t in found.trials}
    return [
        *_empty_groups(groups, found.not_counted),
        *_tuned_seeds(found.runs, found.trials),
        *_collapsed(found.trials),
        *_mixed_versions([r for r in found.candidates if r.run_id in counted]),
        *_preempted(found.candidates),
    ]


def metric_ranges(metric: str) -> tuple[Bounds | None, Bounds | None]:
    """(range of a value, range of a difference of two) for a metric in percent
    (accuracy, exact match); (None, None) for an unbounded one (loss, perplexity)."""
    if base_name(metric) in record_names.PERCENT_METRICS:
        return (0.0, 100.0), (-100.0, 100.0)
    return None, None


def _recorded_prices(parent: RunRecord | None) -> Prices | None:
    """The prices the sweep run recorded from its spec (`sweeper.cost`), if any."""
    if parent is None or not parent.cost:
        return None
    data = json.loads(parent.cost)
    return Prices(float(data["cpu_hour"]), float(data["gpu_hour"]), str(data["currency"]))


def _plan(parent: RunRecord | None) -> SequentialPlan | None:
    """The `--until-decided` plan recorded on the parent run, if any."""
    if parent is None or not parent.sequential_plan:
        return None
    return SequentialPlan.from_dict(json.loads(parent.sequential_plan))


def with_curves(summary: Summary, client: MlflowClient | None = None) -> Summary:
    """`summary` with every counted trial's validation curve, which the figures draw: a
    trial whose best checkpoint came from its record (`summarize`) has none until its
    selection-metric history is read here, from the summary's store (through `client`
    if given)."""
    missing = [t.run_id for t in summary.trials if not t.valid_curve]
    if not missing:
        return summary
    metric = summary.selection.metric
    histories = _read(summary.tracking_uri, client, lambda s: s.histories(missing, (metric,)))

    def curve(trial: CountedTrial) -> tuple[tuple[int, float], ...]:
        points = histories.get(trial.run_id, {}).get(metric, ())
        return trial.valid_curve or tuple(sorted(by_step(points).items()))

    return dataclasses.replace(
        summary, trials=[dataclasses.replace(t, valid_curve=curve(t)) for t in summary.trials]
    )


def _mixed_versions(counted: Sequence[RunRecord]) -> list[str]:
    """Counted trials that trained on different package versions (a resume after an
    upgrade, or nodes with different images): a difference between groups may then be
    the stack's. Every counted trial reported its versions (`record_format` gives a
    trial run that predates the tag `{}`: none to compare)."""
    seen: dict[str, Counter[str]] = {}
    for record in counted:
        for name, version in json.loads(record.versions).items():
            seen.setdefault(name, Counter())[version] += 1
    return [
        f"counted trials ran with different {name} versions: "
        + ", ".join(f"{version} ({n} run(s))" for version, n in sorted(c.items()))
        for name, c in sorted(seen.items())
        if len(c) > 1
    ]


def _preempted(runs: Sequence[RunRecord]) -> list[str]:
    """Trials that were preempted and resumed from the checkpoint saved on the notice
    (`tune.preemption`): their results stand; the line says how often it happened."""
    hit = [r for r in runs if r.preemptions]
    if not hit:
        return []
    times = sum(r.preemptions for r in hit)
    names = ", ".join(f"{r.run_name} ({r.preemptions})" for r in hit)
    return [
        f"{len(hit)} trial(s) preempted {times} time(s) in all and resumed from the "
        f"checkpoint saved on the notice: {names}"
    ]


def _empty_groups(groups: Sequence[GroupStats], not_counted: Sequence[NotCounted]) -> list[str]:
    """A group none of whose trials counted has no Table 2 row: say so, with why."""
    shown = {g.group for g in groups}
    lost: dict[str, Counter[str]] = {}
    for item in not_counted:
        if item.group not in shown and item.outcome in TALLIED:
            lost.setdefault(item.group, Counter())[item.outcome.replace("_", "-")] += 1
    return [
        f"group {group}: no trial counted ({', '.join(f'{n} {k}' for k, n in sorted(c.items()))})"
        for group, c in sorted(lost.items())
    ]


def _tuned_seeds(runs: Sequence[RunRecord], trials: Sequence[CountedTrial]) -> list[str]:
    """Counted confirm trials on a seed their group's search tuned on (a spec that set
    search.allow_seed_overlap): their scores are biased upward; say which."""
    tuned = {(r.group, r.seed) for r in runs if r.stage == Stage.SEARCH}
    biased = sorted({t.seed for t in trials if (t.group, t.seed) in tuned and t.seed is not None})
    if not biased:
        return []
    return [
        f"confirm seed(s) {biased} were also tuning seeds (search.allow_seed_overlap): "
        "the configuration was picked on them, so their test accuracy is biased upward "
        "(selection bias)"
    ]


def _collapsed(trials: Sequence[CountedTrial]) -> list[str]:
    """Counted trials whose test predictions were all one class (Table 1's note):
    their scores are the class's share, and comparisons with them are far from the
    normal differences the t-based decisions assume."""
    found = [f"{t.group} seed {t.seed}" for t in trials if t.collapsed_class is not None]
    if not found:
        return []
    return [
        f"{len(found)} counted trial(s) predicted one class for every test example at their "
        f"last evaluation (collapsed): {', '.join(found)}; comparisons with them say so"
    ]


def _pick_parent(parents: Sequence[RunRecord], counted: Sequence[RunRecord]) -> RunRecord | None:
    """The sweep run most counted trials hang from; ties: the latest started."""
    if not parents:
        return None
    children = Counter(r.parent_run_id for r in counted)
    return max(parents, key=lambda p: (children[p.run_id], p.start_time or 0, p.run_id))
