"""The summariser's records: what it reads from MLflow and what it reports.

Plain frozen dataclasses, free of MLflow types, so that selection and statistics are
pure functions a unit test can feed by hand, and the JSON report is `to_dict()` of the
same objects the tables are printed from (one source, no drift between formats).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sweeper.record_names import METRIC_BEST_PREFIX, METRIC_WALL_TIME, SEED_ALL
from sweeper.selection import ACCURACY, Selection
from sweeper.summarize.costs import SweepCost
from sweeper.trainers.predictions import SplitPredictions


@dataclass(frozen=True)
class Point:
    """One logged value of a metric: MLflow's (step, timestamp, value)."""

    step: int
    timestamp: int
    value: float


@dataclass(frozen=True)
class RunRecord:
    """One MLflow run of the experiment, reduced to what the summariser needs."""

    run_id: str
    run_name: str
    parent_run_id: str | None
    mlflow_status: str
    """MLflow's own status: FINISHED, FAILED, KILLED, RUNNING or SCHEDULED."""
    start_time: int | None
    """Milliseconds since the epoch; orders duplicates (earliest kept)."""
    end_time: int | None
    role: str | None
    sweep: str | None
    trial_key: str | None
    group: str
    seed: int | None
    init: str
    framework: str
    method: str
    stage: str | None
    status: str | None
    """sweeper's status tag: finished, failed, early_stopped, running (None: untagged)."""
    error: str | None
    trainable_params: int | None
    latest: dict[str, float] = field(default_factory=dict)
    """Latest value of every metric (the one at the highest step)."""
    search_params: str | None = None
    """Search and confirm trials: JSON of the searched values (the sweeper.search_params tag)."""
    inputs: str | None = None
    """JSON of the inputs' digests the trial was made from (the sweeper.inputs tag)."""
    versions: str | None = "{}"
    """JSON {package: version} the trial trained with (sweeper.versions, sent with its
    every report; None on a run that never reported, which is not counted)."""
    preemptions: int = 0
    """Times the trial was preempted and resumed from its notice checkpoint
    (sweeper.preemptions)."""
    precision: str = "fp32"
    """The `train.precision` param of a trial run ('' on other runs)."""
    report_digest: str | None = None
    """Sweep runs: the digest of the summary last logged to them (sweeper.report_digest);
    a summary with the same digest has nothing new to log."""
    select: str | None = None
    """Sweep runs of a spec that sets `select:`: its JSON (sweeper.select)."""
    sequential_plan: str | None = None
    """Sweep runs of `--until-decided`: the plan's JSON (sweeper.sequential_plan)."""
    cost: str | None = None
    """Sweep runs of a spec with `cost:`: its prices' JSON (sweeper.cost)."""
    seed_source: str = SEED_ALL
    """Trial runs: which randomness the seed set (sweeper.seed_source; `all` where the
    tag is absent, as on records made before it)."""
    seeds: dict[str, int] = field(default_factory=dict)
    """Trial runs: the seed of each source (`record_names.SEED_SOURCES`) as tagged;
    empty where untagged (every source then ran with `seed`)."""
    predictions: tuple[str, ...] = ()
    """Trial runs: the splits whose per-example predictions were uploaded
    (sweeper.predictions; `sweeper.trainers.predictions`)."""

    @property
    def variant(self) -> str:
        """The group's searched/grid values, e.g. `train.lr=1e-05` ('' for none)."""
        _, bracket, rest = self.group.partition("[")
        return rest.removesuffix("]") if bracket else ""

    @property
    def wall_time(self) -> float | None:
        """Seconds the trial ran: its last `wall_time` metric, else end - start."""
        value = self.latest.get(METRIC_WALL_TIME)
        if value is not None:
            return value
        if self.start_time is not None and self.end_time is not None:
            return (self.end_time - self.start_time) / 1000.0
        return None


@dataclass(frozen=True)
class CountedTrial:
    """Table 1 row: a counted trial at its best-validation checkpoint. (What a trainer
    produced is `sweeper.trainers.runner.TrialResult`, another thing.)"""

    run_id: str
    run_name: str
    trial_key: str
    group: str
    framework: str
    init: str
    method: str
    variant: str
    seed: int | None
    best_valid: float
    """The selection metric (`Selection.metric`, classification: validation accuracy)
    at the best step."""
    best_step: int
    best_epoch: float | None
    test_value: float
    """The first reported test metric (`Selection.primary`, classification: test
    accuracy) logged at `best_step` (docs/architecture.md, invariant 3)."""
    wall_time: float | None
    trainable_params: int | None
    valid_curve: tuple[tuple[int, float], ...] = field(default=(), repr=False)
    """The selection metric per step (for the figures; not written to the tables)."""
    precision: str = "fp32"
    """Arithmetic it was fine-tuned in (`train.precision`)."""
    diverged: bool = False
    """Its last train loss is NaN or infinite. Still counted (its best checkpoint came
    before), and its group's Table 2 note says so."""
    other_tests: dict[str, float] = field(default_factory=dict)
    """The other reported test metrics at `best_step`, by logged name."""
    collapsed_class: int | None = None
    """A classifier whose test predictions were all this one class at its last
    evaluation (`sweeper.summarize.assumptions.collapsed_class`); None otherwise or
    when the trial logged no per-class metrics. Flagged in Table 1 and the notes."""
    seed_source: str = SEED_ALL
    """Which randomness its seed set (`RunRecord.seed_source`)."""
    seeds: dict[str, int] = field(default_factory=dict)
    """The seed of each source (`RunRecord.seeds`); empty: every source ran with `seed`."""
    predictions: tuple[str, ...] = ()
    """Splits whose per-example predictions its run holds (`RunRecord.predictions`)."""

    def seed_of(self, source: str) -> int | None:
        """The seed `source` ran with: as tagged, else the trial's seed."""
        return self.seeds.get(source, self.seed)

    def to_dict(self, selection: Selection = ACCURACY) -> dict[str, Any]:
        """Values under their metric names (`best_valid_accuracy`, `test_accuracy` for a
        classification sweep; `best_valid_loss`, `test_exact_match`, ... otherwise)."""
        data: dict[str, Any] = {}
        for key, value in _shallow(self, skip="valid_curve").items():
            if key == "best_valid":
                data[METRIC_BEST_PREFIX + selection.metric] = value
            elif key == "test_value":
                data[selection.primary] = value
                data.update({name: self.other_tests.get(name) for name in selection.report[1:]})
            elif key == "predictions" or (key in _UNLESS_VARIED and not self.seeds):
                continue  # which files the run holds; the seed columns of a sweep that varies none
            elif key != "other_tests":
                data[key] = value
        return data


_UNLESS_VARIED = ("seed_source", "seeds")


@dataclass(frozen=True)
class NotCounted:
    """A trial run left out of the tables, and why."""

    run_id: str
    run_name: str
    trial_key: str | None
    group: str
    seed: int | None
    reason: str
    outcome: str = "other"
    """What kept it out, as Table 2 counts it: `failed`, `diverged` (failed on a NaN or
    infinite value), `early_stopped`, `unfinished` (interrupted or still running),
    `search` (a search-stage trial) or `other` (a duplicate, missing tags or metrics)."""

    def to_dict(self) -> dict[str, Any]:
        return _shallow(self)


@dataclass(frozen=True)
class GroupStats:
    """Table 2 row: test accuracy over the seeds of one group.

    `std` is the sample standard deviation (ddof=1) and the CI uses Student's t with
    n - 1 degrees of freedom; both are None (shown "n/a") when n = 1.
    """

    group: str
    framework: str
    init: str
    method: str
    variant: str
    n: int
    seeds: tuple[int | None, ...]
    mean: float
    std: float | None
    ci_low: float | None
    ci_high: float | None
    min: float
    max: float
    mean_best_step: float
    trainable_params: tuple[int, ...]
    """Distinct trainable-parameter counts tagged on the group's runs (usually one)."""
    note: str
    boot_low: float | None = None
    boot_high: float | None = None
    """95% bootstrap CI of the mean (BCa, `scipy.stats.bootstrap`); None when n < 2."""
    outcomes: dict[str, int] = field(default_factory=dict)
    """Runs of the group by outcome beside the counted ones: failed, diverged,
    early_stopped, unfinished (Table 2's "Not counted" column; zero counts omitted)."""
    other_means: dict[str, float] = field(default_factory=dict)
    """Mean of each other reported test metric (`Selection.report[1:]`) over the
    group's counted trials, by logged name; empty for a classification sweep."""
    cpu_hours: float | None = None
    gpu_hours: float | None = None
    """Resource-hours held by the group's runs, every attempt (lost ones, failed runs
    included; `sweeper.summarize.costs`); None when no run has a cost ledger."""
    cost: float | None = None
    """Their price at the spec's `cost:` prices, in `currency`; None without prices."""
    currency: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = _shallow(self)
        data["seeds"] = list(self.seeds)
        data["trainable_params"] = list(self.trainable_params)
        data["outcomes"] = dict(self.outcomes)
        del data["other_means"]
        data.update({f"{name}_mean": value for name, value in self.other_means.items()})
        return data


@dataclass(frozen=True)
class Comparison:
    """Mean test accuracy of group a minus group b: one comparison of a summary's family.

    The groups differ on exactly one axis (`axis`) and agree on every other one
    (`within`). `sweeper.summarize.compare` builds it; `sweeper.summarize.decide` fills
    the family-wide fields (Holm-adjusted p, decision, seeds needed).
    """

    axis: str
    """What differs: `framework`, `init`, `method` or a grid parameter (`lora.r`)."""
    kind: str
    """`A - B` by the axis' values, e.g. `pretrained - random`, `lora.r=8 - lora.r=16`."""
    within: str
    """What the two groups share, e.g. `fairseq/full`."""
    group_a: str
    group_b: str
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    diff: float
    """The difference tested, in percentage points: the mean of the seed-matched
    differences when paired, else mean_a - mean_b (the same when every seed pairs)."""
    paired: bool
    """Tested on seed-matched differences (paired t); False: Welch's unpaired t."""
    n_pairs: int
    """Seeds counted in both groups."""
    test: str
    """The test behind ci_*, t, df and p_value: `paired t` or `Welch t`."""
    ci_low: float | None
    ci_high: float | None
    """95% t interval of `diff`. None: undefined (fewer than 2 seeds). ci_low == ci_high:
    no spread (every seed gives the same difference), which is not a confidence
    interval but the point itself; the tables print it `-0.53 (no spread)`."""
    df: float | None
    t: float | None
    p_value: float | None
    """Two-sided p of `test`, uncorrected."""
    boot_low: float | None
    boot_high: float | None
    """95% bootstrap CI of the same difference (BCa; resampling pairs when paired)."""
    p_wilcoxon: float | None
    """Wilcoxon signed-rank on the seed-matched differences (paired only); None where
    its exact p cannot fall below alpha (fewer than 6 non-zero differences at 0.05: it
    drops zeros), and the table says so: a test that cannot reject is no evidence
    either way."""
    note: str
    p_holm: float | None = None
    """p_value after Holm's correction across the summary's comparisons (fixed-n rule
    only; None after a sequential loop, where the fixed-n p decides nothing); under
    `--population`, of the seeds x examples p (`TestSetStats.p_combined`) where the
    comparison has one (`TestSetStats.decides`)."""
    decision: str = "undecided"
    """`A better`, `B better` (named by group), `equivalent within ±D` or `undecided`,
    by `rule` at family-wise level `alpha`."""
    alpha: float = 0.05
    seeds_needed: int | None = None
    """For an undecided comparison: seeds per group at which the rule would decide if
    the observed effect and spread were the truth (`sweeper.summarize.decide`): an
    estimate from a noisy effect, not a promise; None when not estimable."""
    rule: str = "Holm"
    """What decided: `Holm` (fixed seeds, Holm-adjusted p), `interval` (fixed seeds with
    a margin: the Bonferroni interval below), or after `--until-decided`
    `group-sequential` (the plan's boundaries, `sweeper.summarize.group_sequential`) or
    `anytime-valid` (the confidence sequence, `sweeper.summarize.sequential`)."""
    decision_low: float | None = None
    decision_high: float | None = None
    """The interval the decision is read from: it excludes 0 for `better`, lies inside
    ±margin for `equivalent`. Level `decision_level`; clipped to the metric's range.
    None: the data cannot bound it (too few seeds, or no spread where no exact test
    could reach the level); low == high: no spread, the point (see ci_low). Under
    `--population` (`TestSetStats.decides`), the seeds x examples t interval."""
    decision_level: float | None = None
    """Confidence of the decision interval: rule `Holm`, 1 - the level Holm's step-down
    tested this comparison at (`decide.holm_levels`, one per comparison); rules
    `interval`, `group-sequential` and `anytime-valid`, 1 - alpha / (comparisons in the
    family)."""
    margin: float | None = None
    """The equivalence margin D (metric units), when one was given."""
    equivalent_within: float | None = None
    """The smallest margin the data already support: the largest |bound| of the
    decision interval; None when that interval excludes 0 or is unbounded."""
    look: int | None = None
    """Sequential rule: the look (1-based, over the plan's looks) the decision is read
    at: the first that decided, else the last with data."""
    n_decision: int | None = None
    """Seed pairs at that look."""
    p_improve: float | None = None
    """P(A > B) over seed-matched pairs: the share of seeds on which A beat B (a tie
    counts one half), `paired` comparisons only."""
    p_improve_low: float | None = None
    p_improve_high: float | None = None
    """95% Wilson score interval of p_improve."""
    cohens_dz: float | None = None
    """Standardized effect of a paired comparison: mean difference over the standard
    deviation of the differences (Cohen's d_z); None without spread."""
    p_sign_flip: float | None = None
    """Two-sided exact sign-flip p of the seed-matched differences (`sweeper.summarize.
    exact`; paired only; None with fewer than 2 pairs or all differences 0): the test
    without the normal assumption, shown beside every decision. At a tie (every
    difference equal) a decision needs it below the level its interval is read at
    (`decide.exact_verdict`)."""
    aso: float | None = None
    """Almost Stochastic Order's epsilon_min (A over B; < 0.5: A dominates), with
    `sweeper summarize --aso` only."""
    needed_trials: int | None = None
    needed_cpu_hours: float | None = None
    needed_gpu_hours: float | None = None
    """With `seeds_needed`: the trials that would bring both groups to it, and the
    resource-hours they would hold at each group's recorded seconds per counted trial
    (`sweeper.summarize.costs.needed`); GPU-hours only when the sweep held a GPU."""
    needed_cost: float | None = None
    """Their price at the spec's `cost:` prices, in `currency`; None without prices."""
    currency: str | None = None
    test_set: TestSetStats | None = None
    """What the test set itself can resolve, from the trials' per-example test
    predictions (`sweeper.summarize.resolution`); None where they lack them, and then
    left out of `to_dict`, so a record without predictions reports as before."""

    def to_dict(self) -> dict[str, Any]:
        data = _shallow(self, skip="test_set")
        if self.test_set is not None:
            data["test_set"] = self.test_set.to_dict()
        return data


@dataclass(frozen=True)
class TestSetStats:
    """A comparison A - B seen from its test examples (`sweeper.summarize.resolution`
    says how each number is computed and why). Differences in percentage points."""

    __test__ = False  # not a pytest class, whatever its name

    examples: int
    """Test examples every trial of the comparison was scored on (shared ids)."""
    low: float | None
    high: float | None
    """95% BCa bootstrap interval of the difference over the test examples, each
    group's trials pooled per example: this test set's sampling, these trials held.
    low == high: every example gives the same difference."""
    p_mcnemar: float | None
    """Two-sided exact McNemar p of the seed pairs combined (the binomial test of the
    pooled discordant counts); paired comparisons only."""
    discordant: tuple[tuple[int, int], ...]
    """Per seed pair, (examples only A got right, examples only B got right)."""
    seed_variance: float | None
    """Variance of the difference from the seeds (the seed term: shrinks as 1/seeds)."""
    example_variance: float | None
    """Variance of the difference from the test examples, as seeds grow without bound
    (the test-set term: it stays whatever the seeds)."""
    df: float | None
    """Satterthwaite degrees of freedom of the two terms together."""
    combined_low: float | None
    combined_high: float | None
    """95% seeds x examples t interval: other seeds and another test set of the same
    size from the same distribution (the population claim)."""
    p_combined: float | None
    """Two-sided p of the seeds x examples t statistic."""
    resolution: float | None = None
    """X: the half-width, at the comparison's decision level, that the seeds x examples
    interval keeps however many seeds are added; no number of seeds decides a
    difference below ±X on a test set of this size. None where it cannot be estimated."""
    resolution_level: float | None = None
    """The confidence X is at (the comparison's `decision_level`)."""
    below_resolution: bool = False
    """|difference| < X: the summary says so in words and offers no seeds needed."""
    decides: bool = False
    """`--population`: the seeds x examples interval decided this comparison."""
    withheld: str | None = None
    """Why seeds needed is not offered, where the test set is the reason."""

    def to_dict(self) -> dict[str, Any]:
        data = _shallow(self)
        data["discordant"] = [list(pair) for pair in self.discordant]
        return data


@dataclass(frozen=True)
class VarianceRow:
    """One row of the variance table (`sweeper.summarize.variance`): a group's test-metric
    variance from one source of randomness, or the test set's sampling variance.

    `group` is the base group: the Table 2 groups that differ only by which seed source
    varied (`...[seed_source=init]`, ...) are one base group here. Units: the metric's
    (percentage points for accuracy), squared for `variance`."""

    group: str
    source: str
    """`all` (every source varied at once: ordinary seeds), one of
    `record_names.SEED_SOURCES` (that source alone, the others held), or `test_set`
    (the variance a new test set of the same size would add to one trial's value)."""
    n: int
    """Trials in the block; `test_set`: trials whose predictions at the reported
    checkpoint were read."""
    mean: float
    """Their mean test value."""
    std: float | None
    variance: float | None
    """Sample variance (ddof=1) of the block's test values; `test_set`: the mean over
    the trials of each one's bootstrap variance. None: undefined (n = 1)."""
    variance_low: float | None = None
    variance_high: float | None = None
    """95% chi-square interval of `variance` (seed rows with n >= 2; None otherwise)."""
    std_low: float | None = None
    std_high: float | None = None
    """The same interval for `std` (square roots of the bounds)."""
    held: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """One-at-a-time rows: the seeds the other sources were held at (normally one each)."""
    examples: int | None = None
    """`test_set`: test examples per trial (None when the trials' counts differ)."""
    ratio: float | None = None
    """A seed row's `variance` over its group's test-set variance (None on the
    test-set row itself, and without one)."""

    def to_dict(self) -> dict[str, Any]:
        data = _shallow(self)
        data["held"] = {k: list(v) for k, v in self.held.items()}
        return data


@dataclass(frozen=True)
class SearchGroup:
    """One group's search stage: its trials, best configuration and Optuna's importances."""

    group: str
    study: str
    """Optuna study name (`<sweep>:<group>`)."""
    metric: str
    mode: str
    trials: int
    finished: int
    early_stopped: int
    not_finished: int
    """Failed, interrupted or still running."""
    best_run_id: str | None
    best_value: float | None
    """The metric at the best trial's best validation point."""
    best_step: int | None
    best_params: dict[str, Any]
    importances: dict[str, float]
    """Optuna parameter importances (sum to 1); empty when undefined (see note)."""
    note: str
    expected_best: tuple[tuple[int, float], ...] = ()
    """(n, expected best metric over n search trials) for n = 1..finished trials, the
    unbiased estimator of `sweeper.summarize.budget` (Dodge et al. 2019's curve)."""

    def to_dict(self) -> dict[str, Any]:
        data = _shallow(self)
        data["best_params"] = dict(self.best_params)
        data["importances"] = dict(self.importances)
        data["expected_best"] = [list(point) for point in self.expected_best]
        return data


@dataclass(frozen=True)
class Summary:
    """Everything `sweeper summarize` reports about one sweep."""

    experiment: str
    experiment_id: str
    tracking_uri: str
    sweep: str | None
    parent_run_id: str | None
    trials: list[CountedTrial]
    groups: list[GroupStats]
    comparisons: list[Comparison]
    not_counted: list[NotCounted]
    notes: list[str] = field(default_factory=list)
    search: list[SearchGroup] = field(default_factory=list)
    """The search stage per group (empty for a grid sweep)."""
    unmarked: tuple[str, ...] = ()
    """Counted trial runs without the best-checkpoint metrics (`record_names.BEST_METRIC_NAMES`):
    the final report that carries them never reached the store (its driver died
    first, or the trial ran before they existed); logging the report adds them."""
    logged_digest: str | None = None
    """The parent run's `sweeper.report_digest`: the digest of the report last logged
    to it (`sweeper.summarize.report.digest`); not part of the report itself."""
    selection: Selection = ACCURACY
    """What picked each best checkpoint and which test metrics are reported there."""
    plan: SequentialPlan | None = None
    """The `--until-decided` plan recorded on the parent run before its first look;
    None for a sweep whose seeds were fixed in advance."""
    margin: float | None = None
    """The equivalence margin the comparisons were decided with (None: none)."""
    cost: SweepCost | None = None
    """What the sweep's trials held (their cost ledgers) and its price; None when no
    trial run has a ledger."""
    variance: tuple[VarianceRow, ...] = ()
    """The variance table (`sweeper.summarize.variance`); empty where it has nothing to
    say (no group varied a single seed source and no trial's predictions were read)."""
    test_predictions: dict[str, SplitPredictions] = field(default_factory=dict, repr=False)
    """{run id: its test-split predictions} of the counted trials whose runs hold them
    (`sweeper.summarize.example_reader`); what the test-set statistics are computed
    from, not itself part of the report."""
    population: bool = False
    """`--population`: comparisons with test predictions were decided by their seeds x
    examples interval (`TestSetStats.decides`), not by the seeds alone."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; the summary.json artifact and `--format json`."""
        return {
            "experiment": self.experiment,
            "experiment_id": self.experiment_id,
            "tracking_uri": self.tracking_uri,
            "sweep": self.sweep,
            "parent_run_id": self.parent_run_id,
            **(
                {}
                if self.selection.is_default()
                else {"selection": _selection_dict(self.selection)}
            ),
            "accuracy_unit": "percent",
            "std": "sample standard deviation (ddof=1)",
            "ci": "95% confidence interval: Student's t (groups), paired t or Welch "
            "(comparisons, see each one's `test`); boot_*: BCa bootstrap; equal bounds: "
            "no spread (the point, not an interval); null: undefined",
            "correction": _correction(self.plan, self.margin),
            "plan": None if self.plan is None else self.plan.to_dict(),
            "margin": self.margin,
            **({"population": True} if self.population else {}),
            "trials": [t.to_dict(self.selection) for t in self.trials],
            "groups": [g.to_dict() for g in self.groups],
            "comparisons": [c.to_dict() for c in self.comparisons],
            "not_counted": [n.to_dict() for n in self.not_counted],
            "notes": list(self.notes),
            "search": [group.to_dict() for group in self.search],
            "cost": None if self.cost is None else self.cost.to_dict(),
            **({"variance": _variance_dict(self.variance)} if self.variance else {}),
        }


GROUP_SEQUENTIAL_METHOD = (
    "group-sequential t (Lan-DeMets O'Brien-Fleming-type spending), Bonferroni"
)
ANYTIME_METHOD = "anytime-valid t (mixture e-process), Bonferroni"
RULE_GROUP_SEQUENTIAL = "group-sequential"
RULE_ANYTIME = "anytime-valid"
SEQUENTIAL_RULES = (RULE_GROUP_SEQUENTIAL, RULE_ANYTIME)
"""A comparison's `rule` after `--until-decided`: the plan's boundaries, or (for older
plans and pairs past a plan) the anytime-valid confidence sequence."""


@dataclass(frozen=True)
class SequentialPlan:
    """How `sweeper run --until-decided` adds seeds, fixed before its first look.

    The looks are at `start`, `start + batch`, ... seeds per group, and at `max_seeds`.
    Recorded on the sweep's parent run (tag `sweeper.sequential_plan`) so that the
    summary knows the seeds were added until decided, and a resume cannot change it.
    """

    start: int
    """Seeds of the grid (the first look)."""
    batch: int
    """Seeds added per look."""
    max_seeds: int
    """Seeds per group at most (the last look)."""
    alpha: float
    """Family-wise error rate of the decisions over every look and comparison."""
    margin: float | None = None
    """Equivalence margin D, when given: a comparison inside ±D stops as equivalent."""
    method: str = GROUP_SEQUENTIAL_METHOD
    """The rule the decisions are made by, fixed with the plan: `GROUP_SEQUENTIAL_METHOD`
    (boundaries over these looks, `sweeper.summarize.group_sequential`) or
    `ANYTIME_METHOD` (valid at any looks, `sweeper.summarize.sequential`; plans recorded
    before the group-sequential rule keep it)."""

    extended_to: int | None = None
    """Seeds per group at most after a resume raised `--max-seeds` past the plan: the
    looks go on every `batch` seeds up to it, and a comparison with more pairs than
    `max_seeds` is decided by the anytime-valid rule (the plan's boundaries spent all
    of alpha by `max_seeds`)."""

    def looks(self) -> tuple[int, ...]:
        """Seeds per group at each look."""
        sizes = [*range(self.start, self.max_seeds, self.batch), self.max_seeds]
        if self.extended_to is not None and self.extended_to > self.max_seeds:
            sizes += [*range(self.max_seeds + self.batch, self.extended_to, self.batch)]
            sizes.append(self.extended_to)
        return tuple(sizes)

    def resumed_as(self, asked: SequentialPlan) -> SequentialPlan:
        """The plan a resume that asks for `asked` goes on under: this one, with its
        rule, extended when `asked` raises `--max-seeds` past it. ValueError naming
        what else differs: decisions are only valid under the plan they were made by."""
        fixed = ("start", "batch", "alpha", "margin")
        differ = [d for d in self.differences(asked) if d.split(":")[0] in fixed]
        if asked.max_seeds < self.max_seeds:
            differ.append(f"max_seeds: {self.max_seeds} -> {asked.max_seeds} (only raised)")
        if differ:
            raise ValueError("; ".join(differ))
        if asked.max_seeds > max(self.max_seeds, self.extended_to or 0):
            return dataclasses.replace(self, extended_to=asked.max_seeds)
        return self

    def to_dict(self) -> dict[str, Any]:
        return _shallow(self)

    def differences(self, other: SequentialPlan) -> list[str]:
        """`field: recorded -> asked` for every field that differs."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [f"{k}: {mine[k]} -> {theirs[k]}" for k in mine if mine[k] != theirs[k]]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SequentialPlan:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _correction(plan: SequentialPlan | None, margin: float | None) -> str:
    if plan is not None:
        return f"Bonferroni across the comparisons, {plan.method} over the looks (decision_*)"
    if margin is not None:
        return (
            "Bonferroni across the comparisons (decision_* intervals); at a tie, paired "
            "decisions need the exact sign-flip test at the same level (p_sign_flip)"
        )
    return (
        "Holm across the summary's comparisons (p_holm; decision_* at the level Holm "
        "tested each at, decision_level); at a tie, paired decisions need the exact "
        "sign-flip test at that level (p_sign_flip)"
    )


VARIANCE_METHOD = {
    "unit": "the test metric's (percentage points), variance in its square",
    "std": "sample standard deviation (ddof=1) over the block's trials",
    "interval": "95% chi-square interval of the variance (exact for normal values); "
    "std_*: its square roots",
    "test_set": "per trial, the bootstrap variance of its test value over test sets "
    "resampled from its stored per-example predictions; mean over the group's trials",
}


def _variance_dict(rows: tuple[VarianceRow, ...]) -> dict[str, Any]:
    return {**VARIANCE_METHOD, "rows": [row.to_dict() for row in rows]}


def _selection_dict(selection: Selection) -> dict[str, Any]:
    return {"metric": selection.metric, "mode": selection.mode, "report": list(selection.report)}


def _shallow(record: Any, skip: str = "") -> dict[str, Any]:
    """Field name -> value. `dataclasses.asdict` deep-copies every value, which is slow
    for thousands of trials; these records hold only scalars, so nothing needs a copy."""
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.name != skip}
