"""Table 1, Table 2, comparisons, the variance table and the not-counted list, in every
output format.

Each table is built once from the Summary's records (`build_tables`) and rendered by
format: markdown, CSV and JSON here, the terminal in `sweeper.summarize.terminal`,
HTML and LaTeX in `sweeper.summarize.html` and `sweeper.summarize.latex`. Displayed
numbers are rounded by `sweeper.summarize.cells` (which the results paragraph quotes
from too) and an undefined value reads "n/a"; CSV and JSON carry
the full-precision values of the same records (null/empty where undefined), so a
spreadsheet never re-derives anything from rounded text. NaN is never written.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sweeper.record_names import METRIC_BEST_PREFIX, SEED_ALL
from sweeper.selection import Selection
from sweeper.summarize.budget import budget_rows
from sweeper.summarize.cells import (
    CI_T,
    DECISION_INTERVAL,
    DIFFERENCE,
    EQUIVALENT_WITHIN,
    NA,
    P_HOLM,
    P_SIGN_FLIP,
    SEEDS_NEEDED,
    amount,
    field,
    interval,
    level_text,
    look,
    metric_format,
    n_ab,
    p_text,
    plan_words,
    sequential_rules,
    signed,
    two,
)
from sweeper.summarize.decide import POWER
from sweeper.summarize.paragraph import results_paragraph
from sweeper.summarize.records import Summary
from sweeper.summarize.resolution_text import (
    COMBINED_HEADER,
    MCNEMAR_CELL,
    MCNEMAR_HEADER,
    SEEDS_X_EXAMPLES_CELL,
    TEST_SET_CELL,
    TEST_SET_HEADER,
    has_test_set,
    rule_text,
    title_text,
)
from sweeper.summarize.spend import sweep_line
from sweeper.summarize.stats import BOOTSTRAP_MIN_N, sign_flip_min_n, wilcoxon_reachable
from sweeper.summarize.variance import RESAMPLES as VARIANCE_RESAMPLES
from sweeper.summarize.variance import TEST_SET
from sweeper.tracking.links import experiment_url


@dataclass(frozen=True)
class Column:
    header: str
    render: Callable[[dict[str, Any]], str]
    numeric: bool = True


@dataclass(frozen=True)
class Table:
    name: str
    """File stem (`table1`, `table2`, `comparisons`, `variance`, `not_counted`)."""
    title: str
    columns: tuple[Column, ...]
    rows: tuple[dict[str, Any], ...]
    """Records as `to_dict()` (CSV writes every key; the columns pick what is shown)."""

    def text_rows(self, limit: int | None = None) -> list[list[str]]:
        rows = self.rows if limit is None else self.rows[:limit]
        return [[c.render(row) for c in self.columns] for row in rows]


def _metric_column(classification_header: str, key: str, selection: Selection) -> Column:
    """A metric's column: `classification_header` for a classification sweep (the
    default selection), else the metric's name."""
    header = classification_header if selection.is_default() else key
    return Column(header, field(key, metric_format(key)))


def _epoch(v: float) -> str:
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.2f}"


def _params(values: list[int]) -> str:
    return ", ".join(f"{v:,}" for v in values)


def build_tables(summary: Summary) -> list[Table]:
    """The tables of a summary, in report order (the variance table where the summary
    has one)."""
    sel = summary.selection
    table1 = Table(
        "table1",
        "Table 1. Best-validation checkpoint of each trial "
        + (
            "(accuracy in %; test accuracy at the best validation step; ties: earliest step)"
            if sel.is_default()
            else f"(best {sel.metric}, {sel.mode}; test metrics at that step; ties: earliest "
            "step; accuracy, macro-F1 and exact match in %)"
        ),
        (
            Column("Group", field("group"), numeric=False),
            Column("Seed", field("seed")),
            Column("Precision", field("precision"), numeric=False),
            _metric_column("Valid acc", METRIC_BEST_PREFIX + sel.metric, sel),
            Column("Step", field("best_step")),
            Column("Epoch", field("best_epoch", _epoch)),
            *(_metric_column("Test acc", name, sel) for name in sel.report),
            Column("Wall time (s)", field("wall_time", lambda v: f"{v:.1f}")),
            Column("Run", field("run_id", lambda v: v[:8]), numeric=False),
            *(
                [Column("Note", _collapsed, numeric=False)]
                if any(t.collapsed_class is not None for t in summary.trials)
                else []
            ),
        ),
        tuple(t.to_dict(sel) for t in summary.trials),
    )
    fmt = metric_format(sel.primary)
    table2 = Table(
        "table2",
        (
            "Table 2. Test accuracy per group, at each trial's best-validation checkpoint (%; std"
            if sel.is_default()
            else f"Table 2. {sel.primary} per group, at each trial's best-validation "
            "checkpoint (std"
        )
        + ": sample standard deviation, ddof=1; 95% CI of the mean: t distribution "
        f"and BCa bootstrap (from n = {BOOTSTRAP_MIN_N}); not counted: the group's failed, "
        "diverged, early-stopped and unfinished runs"
        + (
            "; CPU-h, GPU-h: resource-hours the group's runs held, every attempt, lost ones "
            "included)"
            if summary.cost is not None
            else ")"
        ),
        (
            Column("Group", field("group"), numeric=False),
            Column("n", field("n")),
            Column("Mean", field("mean", fmt)),
            Column("Std (ddof=1)", field("std", fmt)),
            Column("95% CI (t)", CI_T),
            Column("95% CI (bootstrap)", _boot("n")),
            Column("Min", field("min", fmt)),
            Column("Max", field("max", fmt)),
            *(
                Column(f"Mean {name}", field(f"{name}_mean", metric_format(name)))
                for name in sel.report[1:]
            ),
            Column("Mean best step", field("mean_best_step", lambda v: f"{v:.0f}")),
            *_cost_columns(summary),
            Column("Trainable params", field("trainable_params", _params)),
            Column("Not counted", _outcomes, numeric=False),
            Column("Note", field("note"), numeric=False),
        ),
        tuple(g.to_dict() for g in summary.groups),
    )
    comparisons = comparisons_table(summary)
    not_counted = Table(
        "not_counted",
        f"Not counted ({_count(len(summary.not_counted), 'run')})",
        (
            Column("Run", field("run_id", lambda v: v[:8]), numeric=False),
            Column("Group", field("group"), numeric=False),
            Column("Seed", field("seed")),
            Column("Reason", field("reason"), numeric=False),
        ),
        tuple(n.to_dict() for n in summary.not_counted),
    )
    variance = [variance_table(summary)] if summary.variance else []
    tables = [table1, table2, comparisons, *variance, not_counted]
    return [search_table(summary), budget_table(summary), *tables] if summary.search else tables


def _cost_columns(summary: Summary) -> list[Column]:
    """Table 2's resource-hours (GPU-hours when any trial held a GPU) and price (with
    the spec's `cost:`); none when no trial run has a cost ledger."""
    cost = summary.cost
    if cost is None:
        return []
    columns = [Column("CPU-h", field("cpu_hours", amount))]
    if cost.gpu:
        columns.append(Column("GPU-h", field("gpu_hours", amount)))
    if cost.prices is not None:
        columns.append(Column(f"Cost ({cost.prices.currency})", field("cost", amount)))
    return columns


def comparisons_table(summary: Summary) -> Table:
    """The comparisons with the rule that decided them: fixed-n (Holm, or a Bonferroni
    interval with a margin) or the plan's sequential rule after `--until-decided`."""
    sel = summary.selection
    rows = tuple(c.to_dict() for c in summary.comparisons)
    first = summary.comparisons[0] if summary.comparisons else None
    alpha = first.alpha if first else 0.05
    levels = {c.decision_level for c in summary.comparisons}
    level = level_text(first.decision_level if first else None)
    per_row = len(levels) > 1  # Holm: each comparison's interval at its own step level
    sequential = summary.plan is not None
    if sequential:
        rule = (
            f"seeds added until decided ({plan_words(summary)}): decided by each "
            f"comparison's {sequential_rules(summary)} {level} interval (Bonferroni over "
            "the table), valid at every look at once; the fixed-n p is shown for reference "
            "and decides nothing"
        )
    elif summary.margin is not None:
        rule = f"decided by each comparison's {level} t interval (Bonferroni over the table)"
    else:
        rule = (
            "Holm's correction across the table; decision interval and equivalence bound: "
            "each comparison's t interval at the level Holm's step-down tested it at"
        )
    rule += rule_text(summary)
    unit = "test accuracy A - B (percentage points)" if sel.is_default() else f"{sel.primary} A - B"
    title = (
        f"Comparisons. Difference of mean {unit} between groups that differ on one axis; "
        "paired t on seed-matched differences where seeds pair (Wilcoxon signed-rank "
        f"beside it), Welch otherwise; {rule}; family-wise alpha = {alpha:g}"
        + (f"; equivalence margin ±{summary.margin:g}" if summary.margin is not None else "")
        + "; the exact sign-flip p beside (at a tie, every difference equal, it decides)"
        + "; P(A>B): share of seeds A wins, 95% Wilson interval; d_z: mean over std of the "
        "differences; seeds needed: where the rule would decide with 80% power if the "
        "observed effect were the truth"
        + (
            ", with the trials that would bring both groups to it and the resource-hours "
            "they would hold at each group's recorded cost per counted trial"
            if summary.cost is not None
            else ""
        )
        + title_text(summary)
    )
    columns = (
        Column("Axis", field("axis"), numeric=False),
        Column("A - B", field("kind"), numeric=False),
        Column("Within", field("within"), numeric=False),
        Column("n A/B", n_ab),
        Column("Difference", DIFFERENCE),
        Column("95% CI (t)", CI_T),
        Column("95% CI (bootstrap)", _boot("n_pairs")),
        Column("Test", field("test"), numeric=False),
        Column("p (fixed-n, not for decisions)" if sequential else "p", field("p_value", p_text)),
        Column("p (Wilcoxon)", _wilcoxon),
        *([] if sequential else [Column("p (Holm)", P_HOLM)]),
        Column("p (sign-flip, exact)", P_SIGN_FLIP),
        (
            Column("Decision interval (level)", _interval_at_level)
            if per_row
            else Column(f"Decision interval ({level})", DECISION_INTERVAL)
        ),
        *(
            [Column("Look (pairs)", look), Column("Rule", field("rule"), numeric=False)]
            if sequential
            else []
        ),
        Column("Decision", field("decision"), numeric=False),
        Column("Equivalent within", EQUIVALENT_WITHIN),
        Column("P(A>B)", _improve),
        Column("d_z", field("cohens_dz", signed)),
        *(
            [
                Column(TEST_SET_HEADER, TEST_SET_CELL),
                Column(MCNEMAR_HEADER, MCNEMAR_CELL),
                Column(COMBINED_HEADER, SEEDS_X_EXAMPLES_CELL),
            ]
            if has_test_set(summary)
            else []
        ),
        Column(f"Seeds needed ({POWER:.0%} power)", SEEDS_NEEDED),
        *([Column("ASO eps_min", field("aso", two))] if _has_aso(summary) else []),
        Column("Note", field("note"), numeric=False),
    )
    return Table("comparisons", title, columns, rows)


def variance_table(summary: Summary) -> Table:
    """Where each group's variance comes from (`sweeper.summarize.variance`): a row per
    seed source the sweep varied, then the test set's sampling variance."""
    sel = summary.selection
    metric = "test accuracy" if sel.is_default() else sel.primary
    unit = "points" if sel.is_default() else "the metric's units"
    title = (
        f"Variance. Where the seed-to-seed variance of {metric} comes from, per group "
        f"({unit}; variance in their square): one row per seed source varied (all: every "
        "source at once, as grid.seed; init, data order, dropout: that seed alone, the "
        "others held at the seeds shown); std and variance with ddof=1, 95% chi-square "
        "intervals (exact for normal values); test set: the variance a new test set of "
        "the same size would add to one trial's value, the bootstrap over the test "
        f"examples of each trial's stored predictions ({VARIANCE_RESAMPLES:,} resamples), "
        "averaged over the group's trials; seed rows are on this fixed test set, and "
        "one-at-a-time rows need not add up to the all row"
    )
    fmt = metric_format(sel.primary)
    columns = (
        Column("Group", field("group"), numeric=False),
        Column("Source", variance_source, numeric=False),
        Column("Held", _held, numeric=False),
        Column("n", field("n")),
        Column("Mean", field("mean", fmt)),
        Column("Std", field("std", fmt)),
        Column("95% CI (std)", interval("std_low", "std_high")),
        Column("Variance", field("variance", _variance_value)),
        Column("95% CI (variance)", interval("variance_low", "variance_high")),
        Column("Variance / test set's", _ratio),
    )
    return Table("variance", title, columns, tuple(r.to_dict() for r in summary.variance))


VARIANCE_SOURCES = {
    SEED_ALL: "all sources (seed)",
    "init": "init seed alone",
    "data_order": "data order seed alone",
    "dropout": "dropout seed alone",
}


def variance_source(row: dict[str, Any]) -> str:
    """A variance row's source in words: `init seed alone`, `test set (189 examples)`."""
    if row["source"] != TEST_SET:
        return VARIANCE_SOURCES.get(row["source"], row["source"])
    examples = row.get("examples")
    return f"test set ({examples:,} examples)" if examples else "test set"


def _variance_value(v: float) -> str:
    """Two decimals, but 2 significant digits below 0.1 (a std of 0.05 is not 0.00)."""
    return f"{v:.2g}" if 0 < abs(v) < 0.1 else two(v)


def _held(row: dict[str, Any]) -> str:
    held = row.get("held") or {}
    return ", ".join(f"{k}={'/'.join(map(str, v))}" for k, v in held.items() if v)


def _ratio(row: dict[str, Any]) -> str:
    return "" if row["source"] == TEST_SET else field("ratio", two)(row)


def _boot(n_key: str) -> Callable[[dict[str, Any]], str]:
    """A bootstrap interval, or why there is none: too few values to trust one."""
    boot = interval("boot_low", "boot_high")

    def render(row: dict[str, Any]) -> str:
        n = row.get(n_key) or 0
        return f"needs n >= {BOOTSTRAP_MIN_N}" if 2 <= n < BOOTSTRAP_MIN_N else boot(row)

    return render


def _interval_at_level(row: dict[str, Any]) -> str:
    """The decision interval with its own level: `[0.19, 3.40] at 97.5%`."""
    text = DECISION_INTERVAL(row)
    return text if text == NA else f"{text} at {level_text(row.get('decision_level'))}"


def _wilcoxon(row: dict[str, Any]) -> str:
    """Wilcoxon's p, or why not: its exact test cannot reach alpha on this many pairs
    (or, with zero differences, which it drops, on this many non-zero ones)."""
    p_value, n = row.get("p_wilcoxon"), row.get("n_pairs") or 0
    if p_value is None and row.get("paired") and n >= 2:
        needed = sign_flip_min_n(row["alpha"])  # Wilcoxon's smallest p is the sign flip's
        if not wilcoxon_reachable(n, row["alpha"]):
            return f"needs {needed} pairs"
        return f"needs {needed} non-zero pairs"
    return NA if p_value is None else p_text(p_value)


def _improve(row: dict[str, Any]) -> str:
    if row.get("p_improve") is None:
        return NA
    return f"{row['p_improve']:.2f} [{row['p_improve_low']:.2f}, {row['p_improve_high']:.2f}]"


def _collapsed(row: dict[str, Any]) -> str:
    c = row.get("collapsed_class")
    return "" if c is None else f"collapsed: every test prediction class {c} (last evaluation)"


def _outcomes(row: dict[str, Any]) -> str:
    counts = row.get("outcomes") or {}
    return ", ".join(f"{n} {kind.replace('_', '-')}" for kind, n in counts.items())


def _has_aso(summary: Summary) -> bool:
    return any(c.aso is not None for c in summary.comparisons)


def _values(key: str, fmt: Callable[[Any], str]) -> Callable[[dict[str, Any]], str]:
    def render(row: dict[str, Any]) -> str:
        items = row.get(key) or {}
        return ", ".join(f"{k}={fmt(v)}" for k, v in items.items()) if items else NA

    return render


def _param(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def search_table(summary: Summary) -> Table:
    """The search stage: each group's trials, best configuration and importances."""
    first = summary.search[0]
    return Table(
        "search",
        f"Search stage. Best configuration per group (Optuna TPE; {first.metric}, "
        f"{first.mode}, at each trial's best validation point; early-stopped trials "
        "excluded) and Optuna's parameter importances; its runs are not in Tables 1-2",
        (
            Column("Group", field("group"), numeric=False),
            Column("Trials", field("trials")),
            Column("Finished", field("finished")),
            Column("Early-stopped", field("early_stopped")),
            Column("Not finished", field("not_finished")),
            Column("Best value", field("best_value", two)),
            Column("Best step", field("best_step")),
            Column("Best config", _values("best_params", _param), numeric=False),
            Column("Importances", _values("importances", lambda v: f"{v:.2f}"), numeric=False),
            Column("Note", field("note"), numeric=False),
        ),
        tuple(g.to_dict() for g in summary.search),
    )


def budget_table(summary: Summary) -> Table:
    """Expected best search metric against the number of search trials, per group."""
    metric = summary.search[0].metric
    return Table(
        "search_budget",
        f"Search budget. Expected best {metric} over n search trials, per group (Dodge et "
        "al. 2019's curve, unbiased estimator without replacement; finished trials only)",
        (
            Column("Group", field("group"), numeric=False),
            Column("n trials", field("trials")),
            Column("Expected best", field("expected_best", two)),
        ),
        tuple(budget_rows(summary)),
    )


def preamble(summary: Summary) -> list[str]:
    """Where the numbers come from and how many runs they cover."""
    parent = summary.parent_run_id or "none"
    sweep = f"Sweep {summary.sweep}: experiment" if summary.sweep else "Experiment"
    lines = [
        f"{sweep} {summary.experiment!r} (id {summary.experiment_id}) at "
        f"{summary.tracking_uri}, parent run {parent}",
        f"{_count(len(summary.trials), 'trial')} counted in "
        f"{_count(len(summary.groups), 'group')}, "
        f"{_count(len(summary.not_counted), 'run')} not counted",
    ]
    cost = sweep_line(summary)
    if cost is not None:
        lines.append(cost)
    if summary.tracking_uri.startswith(("http://", "https://")):  # a UI is already there
        lines.append(f"MLflow UI: {experiment_url(summary.tracking_uri, summary.experiment_id)}")
    return lines + [f"note: {note}" for note in summary.notes]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


# --- markdown -------------------------------------------------------------------------


def table_markdown(table: Table) -> str:
    if not table.rows:
        return "(none)\n"

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    out = [line([c.header for c in table.columns])]
    out.append("|" + "|".join("---:" if c.numeric else "---" for c in table.columns) + "|")
    out.extend(line(cells) for cells in table.text_rows())
    return "\n".join(out) + "\n"


def to_markdown(summary: Summary) -> str:
    """The whole report as one markdown document (also the MLflow `summary.md`): the
    preamble, the results paragraph, then the tables."""
    parts = [f"# Summary of sweep {summary.sweep or summary.experiment}\n"]
    parts.append("".join(f"{line}  \n" for line in preamble(summary)))
    parts.append(f"\n## Results\n\n{results_paragraph(summary)}\n")
    for table in build_tables(summary):
        parts.append(f"\n## {table.title}\n\n{table_markdown(table)}")
    return "".join(parts)


# --- CSV and JSON -----------------------------------------------------------------------


def table_csv(table: Table) -> str:
    """Every field of the table's records at full precision; lists joined by ';'."""
    buffer = io.StringIO()
    keys = list(table.rows[0]) if table.rows else [_csv_key(c.header) for c in table.columns]
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(keys)
    for row in table.rows:
        writer.writerow([_csv_cell(row.get(k)) for k in keys])
    return buffer.getvalue()


def to_csv(summary: Summary) -> str:
    """All tables in one stream, each after a `# name` line (use --out for one per file)."""
    return "\n".join(f"# {t.name}\n{table_csv(t)}" for t in build_tables(summary))


def to_json(summary: Summary) -> str:
    """summary.json; `allow_nan=False` guarantees no NaN/Infinity ever reaches a reader."""
    return json.dumps(summary.to_dict(), indent=2, allow_nan=False) + "\n"


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ";".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return value


def _csv_key(header: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in header.lower()).strip("_")
