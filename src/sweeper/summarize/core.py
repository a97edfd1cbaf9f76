"""`summarize()`: from an MLflow experiment to a Summary (tables' records and statistics).

The steps are kept as separate pure functions (load -> screen -> select -> stats) so
each rule can be tested on hand-made records; this module only wires them to a store.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from sweeper import record_names
from sweeper.record_names import Stage
from sweeper.selection import Selection, base_name, metric_mode
from sweeper.summarize.compare import compare
from sweeper.summarize.costs import Prices
from sweeper.summarize.decide import ALPHA, decide, with_aso
from sweeper.summarize.mlflow_reader import SummarizeError, open_client
from sweeper.summarize.records import (
    CountedTrial,
    GroupStats,
    NotCounted,
    RunRecord,
    SequentialPlan,
    Summary,
)
from sweeper.summarize.search import load_search
from sweeper.summarize.select import (
    by_step,
    history_keys,
    left_out,
    recorded_checkpoint,
    screen,
    select,
)
from sweeper.summarize.sequential import decide_sequential
from sweeper.summarize.source import MlflowSource, RunSource, SqliteReadFailed, open_source
from sweeper.summarize.spend import sweep_cost, with_group_costs, with_needed
from sweeper.summarize.stats import TALLIED, Bounds, group_stats

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from sweeper.spec.schema import SweepSpec


T = TypeVar("T")

RECORDED = "recorded"
"""`summarize(prices=RECORDED)`: the prices the sweep run recorded (`sweeper.cost`)."""


def summarize(
    experiment: str,
    tracking_uri: str,
    *,
    sweep: str | None = None,
    client: MlflowClient | None = None,
    history_path: str = "auto",
    alpha: float = ALPHA,
    aso: bool = False,
    inputs: dict[str, str] | None = None,
    selection: Selection | None = None,
    margin: float | None = None,
    metric: str | None = None,
    prices: Prices | str | None = RECORDED,
    recompute: bool = False,
) -> Summary:
    """Summarise the trial runs of `experiment` in the store at `tracking_uri`.

    `sweep` keeps only runs tagged with that sweep name (runs without the tag are kept);
    it is required when the experiment holds trials of several sweeps. `client` reads
    through an open MlflowClient (otherwise a SQLite store is read with SQL, see
    `sweeper.summarize.source`); `history_path` forces one of the client's ways of
    reading metric histories (`sqlite`, `bulk`, `server`, `per_run`;
    `sweeper.summarize.mlflow_reader`).
    `alpha` is the family-wise level the comparisons are decided at; `aso` adds Almost
    Stochastic Order (slow; `sweeper.summarize.decide`). `inputs`: the spec's input
    fingerprint (`sweeper.tracking.inputs`); trial runs made from other inputs are
    not counted. `selection`: how best checkpoints are picked and what is reported
    (the spec's `select:`); None: what the sweep run's `sweeper.select` tag says, else
    classification's. `metric`: a measurement (`macro_f1`) the summary is about
    instead (`Selection.on`: best checkpoints by its validation value, its test value
    reported first). `margin`: the equivalence margin D (None: the sequential plan's,
    if the sweep ran `--until-decided` with one). A sweep whose parent run holds a
    sequential plan is decided by `sweeper.summarize.sequential` at the plan's alpha;
    any other by `sweeper.summarize.decide`. `prices`: what a resource-hour costs
    (the spec's `cost:`, `prices_of`); by default the prices the sweep run recorded
    (its `sweeper.cost` tag), if any. A counted trial's best checkpoint comes from the
    best-checkpoint metrics its run carries when they were logged under this summary's
    selection (`select.recorded_checkpoint`), else from its metric histories;
    `recompute` reads the histories of every trial. The trials' validation curves,
    which only the figures draw, are then absent: `with_curves` reads them. Raises
    SummarizeError for input the user must fix.
    """

    def read(source: RunSource) -> Summary:
        return _summarize(
            source, experiment, sweep, history_path, alpha, aso, inputs, selection, margin,
            metric, prices, recompute,
        )  # fmt: skip

    return _read(tracking_uri, client, read)


def _read(uri: str, client: MlflowClient | None, read: Callable[[RunSource], T]) -> T:
    """`read` on the store at `uri` as `open_source` opens it; a locked or damaged
    SQLite file is read again through MLflow's client, which says what is wrong."""
    try:
        return read(open_source(uri, client))
    except SqliteReadFailed:
        return read(open_source(uri, open_client(uri)))


def _summarize(
    source: RunSource,
    experiment: str,
    sweep: str | None,
    history_path: str,
    alpha: float,
    aso: bool,
    inputs: dict[str, str] | None,
    selection: Selection | None,
    margin: float | None,
    metric: str | None = None,
    prices: Prices | str | None = RECORDED,
    recompute: bool = False,
) -> Summary:
    if history_path != "auto" and isinstance(source, MlflowSource):
        source = MlflowSource(source.client, history_path)
    experiment_id, experiment_name = source.experiment(experiment)
    runs = source.runs(experiment_id)
    notes: list[str] = []

    sweep = _pick_sweep(runs, sweep, experiment, notes)
    runs = [r for r in runs if r.sweep in (None, sweep)]
    trial_runs = [r for r in runs if r.role == record_names.ROLE_TRIAL]
    parents = [r for r in runs if r.role == record_names.ROLE_SWEEP]
    untagged = sum(
        1 for r in runs if r.role not in (record_names.ROLE_TRIAL, record_names.ROLE_SWEEP)
    )
    if untagged:
        notes.append(
            f"runs without a {record_names.TAG_ROLE} tag ignored (not sweeper runs): {untagged}"
        )

    trial_runs, other_inputs = _same_inputs(trial_runs, inputs)
    if other_inputs:
        notes.append(
            f"{len(other_inputs)} trial run(s) were made from other inputs than this spec's "
            "(see Not counted): summarise with the overrides the sweep ran with"
        )
    logged_under = Selection.from_json(next((p.select for p in parents if p.select), None))
    if selection is None:
        selection = logged_under
    if metric is not None:
        stored, selection = selection, selection.on(metric)
        if selection.metric != stored.metric:
            notes.append(
                f"best checkpoints picked by {selection.metric} (--metric); the trainers "
                f"stored the ones {stored.metric} picks (the sweep's select:), which is "
                "what --evaluate re-measures"
            )
    candidates, not_counted = screen(trial_runs)
    not_counted += other_inputs
    recorded = {}
    if parents and selection == logged_under and not recompute:
        recorded = {r.run_id: t for r in candidates if (t := recorded_checkpoint(r, selection))}
    unread = [r.run_id for r in candidates if r.run_id not in recorded]
    histories = source.histories(unread, history_keys(selection)) if unread else {}
    trials, unusable = select(candidates, histories, selection, recorded)
    not_counted = sorted([*not_counted, *unusable], key=_listing_order)
    value_range, difference_range = metric_ranges(selection.primary)
    groups = group_stats(trials, not_counted, value_range)
    notes.extend(_empty_groups(groups, not_counted))
    notes.extend(_tuned_seeds(runs, trials))
    notes.extend(_collapsed(trials))
    counted = {t.run_id for t in trials}
    notes.extend(_mixed_versions([r for r in candidates if r.run_id in counted]))
    notes.extend(_preempted(candidates))
    parent = _pick_parent(parents, [r for r in candidates if r.run_id in counted])
    if parent is None:
        notes.append(f"no parent run tagged {record_names.TAG_ROLE}={record_names.ROLE_SWEEP}")
    elif len(parents) > 1:
        notes.append(f"{len(parents)} parent runs; the report goes to {parent.run_id}")
    plan = _plan(parent)
    if plan is not None and margin is None:
        margin = plan.margin
    mode = metric_mode(selection.primary)
    comparisons = compare(groups, trials, alpha if plan is None else plan.alpha, difference_range)
    if plan is None:
        comparisons = decide(comparisons, trials, alpha, mode, margin, difference_range)
    else:
        seed_order = sorted({t.seed for t in trials if t.seed is not None})
        comparisons = decide_sequential(
            comparisons, trials, plan, seed_order, margin, difference_range, mode
        )
    if aso:
        comparisons = with_aso(comparisons, trials)
    if isinstance(prices, str):
        prices = _recorded_prices(parent)
    cost = sweep_cost([r for r in runs if r.role == record_names.ROLE_TRIAL], prices)
    groups = with_group_costs(groups, cost)
    comparisons = with_needed(comparisons, groups, cost)
    return Summary(
        experiment=experiment_name,
        experiment_id=experiment_id,
        tracking_uri=source.uri,
        sweep=sweep,
        parent_run_id=parent.run_id if parent else None,
        trials=trials,
        groups=groups,
        comparisons=comparisons,
        not_counted=not_counted,
        notes=notes,
        search=load_search(source, runs, parent.run_id if parent else None, sweep),
        unmarked=tuple(
            r.run_id
            for r in candidates
            if r.run_id in counted
            and record_names.METRIC_BEST_PREFIX + selection.primary not in r.latest
        ),
        logged_digest=parent.report_digest if parent else None,
        selection=selection,
        plan=plan,
        margin=margin,
        cost=cost,
    )


def metric_ranges(metric: str) -> tuple[Bounds | None, Bounds | None]:
    """(range of a value, range of a difference of two) for a metric in percent
    (accuracy, exact match); (None, None) for an unbounded one (loss, perplexity)."""
    if base_name(metric) in record_names.PERCENT_METRICS:
        return (0.0, 100.0), (-100.0, 100.0)
    return None, None


def prices_of(spec: SweepSpec) -> Prices | None:
    """The spec's `cost:` block as the summary's prices (None without one)."""
    if spec.cost is None:
        return None
    return Prices(spec.cost.cpu_hour, spec.cost.gpu_hour, spec.cost.currency)


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


def summarize_spec(spec: SweepSpec, tracking_uri: str | None = None, **kwargs) -> Summary:
    """Summarise the sweep a spec describes, in the store that spec writes to."""
    from sweeper.tracking import experiment_name, spec_store_uri

    uri = tracking_uri or spec_store_uri(spec)
    kwargs.setdefault("selection", Selection.of(spec.select))
    kwargs.setdefault("prices", prices_of(spec))
    return summarize(experiment_name(spec), uri, sweep=spec.name, **kwargs)


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


def _same_inputs(
    runs: list[RunRecord], inputs: dict[str, str] | None
) -> tuple[list[RunRecord], list[NotCounted]]:
    """Split off the runs tagged with other inputs than the spec's (untagged runs stay)."""
    if inputs is None:
        return runs, []
    from sweeper.tracking.inputs import changed

    kept, other = [], []
    for run in runs:
        differ = changed(json.loads(run.inputs), inputs) if run.inputs else []
        if differ:
            reason = f"made from other inputs than the spec's: {', '.join(differ)} differ"
            other.append(left_out(run, reason))
        else:
            kept.append(run)
    return kept, other


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


def _listing_order(item: NotCounted) -> tuple:
    return (item.group, item.seed if item.seed is not None else -1, item.run_id)


def _pick_sweep(
    runs: Sequence[RunRecord], sweep: str | None, experiment: str, notes: list[str]
) -> str | None:
    """The sweep to report: the one asked for, else the only one the trials are tagged with."""
    names = sorted(
        {r.sweep for r in runs if r.sweep is not None and r.role == record_names.ROLE_TRIAL}
    )
    if sweep is not None:
        others = [n for n in names if n != sweep]
        if others:
            notes.append(f"runs of other sweeps in this experiment ignored: {', '.join(others)}")
        return sweep
    if len(names) > 1:
        raise SummarizeError(
            f"experiment {experiment!r} holds trials of several sweeps ({', '.join(names)}); "
            "choose one with --sweep NAME"
        )
    return names[0] if names else None


def _pick_parent(parents: Sequence[RunRecord], counted: Sequence[RunRecord]) -> RunRecord | None:
    """The sweep run most counted trials hang from; ties: the latest started."""
    if not parents:
        return None
    children = Counter(r.parent_run_id for r in counted)
    return max(parents, key=lambda p: (children[p.run_id], p.start_time or 0, p.run_id))
