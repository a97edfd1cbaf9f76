"""How a value reads in a table cell: shared by the tables and the results paragraph.

Every rounded number of a report goes through these functions, so a number the
results paragraph quotes is the very text of the table cell it comes from: the same
rounding (2 decimals; losses 4; p to 3 decimals, or 2 significant digits below
0.001) and the same "n/a" for an undefined value. A renderer (`Render`) takes one
record's `to_dict()` row, as `Table.rows` holds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sweeper.selection import base_name
from sweeper.summarize.records import SEQUENTIAL_RULES, Summary

NA = "n/a"
"""What an undefined value reads; NaN is never printed."""

Render = Callable[[dict[str, Any]], str]


def field(key: str, fmt: Callable[[Any], str] = str) -> Render:
    """The row's `key` through `fmt`, or "n/a" when it is None or missing."""

    def render(row: dict[str, Any]) -> str:
        value = row.get(key)
        return NA if value is None else fmt(value)

    return render


def two(v: float) -> str:
    """Two decimals: percentages, perplexities, differences' bounds."""
    return f"{v:.2f}"


def metric_format(metric: str) -> Callable[[Any], str]:
    """Percentages and perplexities to 2 decimals, losses to 4."""
    return (lambda v: f"{v:.4f}") if base_name(metric) == "loss" else two


def interval(low_key: str, high_key: str) -> Render:
    """`[low, high]` to 2 decimals; "n/a" unless both bounds are defined. Equal bounds
    are no interval but a value without spread (every seed the same): `-0.53 (no
    spread)`, never `[-0.53, -0.53]`, which would read as a precise estimate."""

    def render(row: dict[str, Any]) -> str:
        low, high = row.get(low_key), row.get(high_key)
        if low is None or high is None:
            return NA
        return f"{low:.2f} {NO_SPREAD}" if low == high else f"[{low:.2f}, {high:.2f}]"

    return render


NO_SPREAD = "(no spread)"


def p_text(v: float) -> str:
    """A p-value: 3 decimals, or `1.2e-05` below 0.001 (where 3 decimals read 0.000)."""
    return f"{v:.3f}" if v >= 0.001 else f"{v:.1e}"


def signed(v: float) -> str:
    """A difference with its sign: `+24.17`, `-0.50`."""
    return f"{v:+.2f}"


def within_text(v: float) -> str:
    """An equivalence bound: `±2.20`."""
    return f"±{v:.2f}"


def level_text(level: float | None) -> str:
    """A decision interval's confidence in percent, 4 significant digits (`98.75%`,
    `98.33%`); without one, its rule."""
    return f"{100 * level:.4g}%" if level else "1 - alpha/m"


def look(row: dict[str, Any]) -> str:
    """`look (pairs)` a sequential decision was read at: `2 (6)`."""
    return NA if row.get("look") is None else f"{row['look']} ({row['n_decision']})"


def n_ab(row: dict[str, Any]) -> str:
    """Seeds counted in group A and in group B: `3/3`."""
    return f"{row['n_a']}/{row['n_b']}"


def plan_words(summary: Summary) -> str:
    """The `--until-decided` plan in words: `3 seeds, +2 per look, at most 9`."""
    plan = summary.plan
    assert plan is not None
    return f"{plan.start} seeds, +{plan.batch} per look, at most {plan.max_seeds}"


def sequential_rules(summary: Summary) -> str:
    """The rules that decided the comparisons after `--until-decided`, in words."""
    rules = dict.fromkeys(c.rule for c in summary.comparisons if c.rule in SEQUENTIAL_RULES)
    return " or ".join(rules) or "sequential"


def amount(v: float) -> str:
    """Resource-hours or money: 2 decimals from 1 up (`1,234.50`), 4 below (`0.0123`),
    so a small sweep's hours do not read 0; nothing at all reads `0`."""
    if v == 0:
        return "0"
    return f"{v:,.2f}" if abs(v) >= 1 else f"{v:.4f}"


def needed_spend(row: dict[str, Any]) -> str:
    """What an undecided comparison's seeds needed would take: `+18 trials, 0.0123
    CPU-h` (GPU-hours and money where the row has them); '' without an estimate."""
    if row.get("needed_trials") is None:
        return ""
    parts = [f"+{row['needed_trials']} trials", f"{amount(row['needed_cpu_hours'])} CPU-h"]
    if row.get("needed_gpu_hours") is not None:
        parts.append(f"{amount(row['needed_gpu_hours'])} GPU-h")
    if row.get("needed_cost") is not None:
        parts.append(f"{amount(row['needed_cost'])} {row.get('currency') or ''}".rstrip())
    return ", ".join(parts)


def seeds_needed(row: dict[str, Any]) -> str:
    """Seeds per group, then what they would take: `12 (+18 trials, 0.0123 CPU-h)`;
    where the test set is why none is offered, `n/a (below the test set's resolution)`."""
    n = row.get("seeds_needed")
    if n is None:
        withheld = (row.get("test_set") or {}).get("withheld")
        return NA if withheld is None else f"{NA} ({withheld})"
    spend = needed_spend(row)
    return f"{n} ({spend})" if spend else str(n)


DIFFERENCE = field("diff", signed)
CI_T = interval("ci_low", "ci_high")
DECISION_INTERVAL = interval("decision_low", "decision_high")
P_HOLM = field("p_holm", p_text)
P_SIGN_FLIP = field("p_sign_flip", p_text)
EQUIVALENT_WITHIN = field("equivalent_within", within_text)
SEEDS_NEEDED = seeds_needed
"""The comparisons table's cells the results paragraph quotes (`SEEDS_NEEDED` as its
two parts: the count, `field("seeds_needed")`, and `needed_spend`)."""
