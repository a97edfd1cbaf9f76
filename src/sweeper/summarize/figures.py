"""The report's figures: validation curves and test accuracy per group; search budget;
where the variance comes from.

`curves.png` is the lab's Figures 1-3 made systematic: validation accuracy against the
update step, one line per seed, one panel per group, panels sharing both axes so
pretrained and random (or fairseq and HF) read against the same scale; a dot marks
each trial's selected (best-validation) checkpoint. `test_accuracy.png` shows every
trial's test accuracy as a point per group, with the group mean and its 95% CI, so a
reader sees the spread that Table 2's mean ± std summarises. `search_budget.png`
(search sweeps) plots each group's expected best validation score against the number
of search trials (`sweeper.summarize.budget`). `variance.png` (a summary with a variance
table, `sweeper.summarize.variance`) draws, per group, the std of one trial's test value
over each seed source the sweep varied, with its 95% interval, beside the test set's.

matplotlib's object API with the Agg canvas (no pyplot): no global backend switch,
no display needed, safe to call from any process.
"""

from __future__ import annotations

import math
from pathlib import Path

from sweeper.summarize.records import CountedTrial, Summary, VarianceRow
from sweeper.summarize.tables import variance_source
from sweeper.summarize.variance import TEST_SET

CURVES_FILE = "curves.png"
TEST_FILE = "test_accuracy.png"
"""A classification sweep's; another selection's is `<primary test metric>.png`."""
BUDGET_FILE = "search_budget.png"
VARIANCE_FILE = "variance.png"
DPI = 120
LEGEND_MAX_SEEDS = 10
"""Above this many seeds the lines share one colour and the legend is left out."""


def write_figures(summary: Summary, out_dir: Path) -> list[Path]:
    """Write the figures into `out_dir`: curves and test accuracy when a trial counted,
    the search budget curve when a search stage finished trials."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if summary.trials:
        written += [curves(summary, out_dir / CURVES_FILE)]
        name = TEST_FILE if summary.selection.is_default() else f"{summary.selection.primary}.png"
        written += [test_values(summary, out_dir / name)]
    if any(g.expected_best for g in summary.search):
        written.append(search_budget(summary, out_dir / BUDGET_FILE))
    if summary.variance:
        written.append(variance_sources(summary, out_dir / VARIANCE_FILE))
    return written


def _figure(width: float, height: float):  # -> matplotlib.figure.Figure
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def curves(summary: Summary, path: Path) -> Path:
    """Validation accuracy against step, one panel per group, one line per seed."""
    groups = [g.group for g in summary.groups]
    ncols = 2 if len(groups) == 4 else min(3, len(groups))
    nrows = math.ceil(len(groups) / ncols)
    figure = _figure(4.6 * ncols, 3.4 * nrows)
    axes = figure.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel()
    seeds = sorted({t.seed for t in summary.trials if t.seed is not None})
    few = len(seeds) <= LEGEND_MAX_SEEDS
    colours = {seed: f"C{i % 10}" for i, seed in enumerate(seeds)}
    for ax, group in zip(axes, groups, strict=False):
        members = [t for t in summary.trials if t.group == group]
        if few:
            for trial in members:
                colour = colours.get(trial.seed, "C0")
                steps, values = zip(*trial.valid_curve, strict=True)
                ax.plot(steps, values, color=colour, alpha=0.9, label=f"seed {trial.seed}")
                ax.plot([trial.best_step], [trial.best_valid], "o", color=colour, ms=5)
            if members:
                ax.legend(fontsize=8, loc="lower right")
        else:  # hundreds of seeds: one collection per panel draws far faster than lines
            _many_curves(ax, members)
        ax.set_title(f"{group} (n={len(members)})", fontsize=10)
        ax.grid(alpha=0.3)
    for ax in axes[len(groups) :]:
        ax.set_visible(False)
    for ax in axes[(nrows - 1) * ncols :]:
        ax.set_xlabel("update (step)")
    for ax in axes[::ncols]:
        ax.set_ylabel(_label(summary, summary.selection.metric, "validation accuracy (%)"))
    shown = _label(summary, summary.selection.metric, "validation accuracy")
    figure.suptitle(
        f"{summary.sweep or summary.experiment}: {shown} per seed "
        "(dot: best-validation checkpoint)",
        fontsize=11,
    )
    figure.savefig(path)
    return path


def _many_curves(ax, members: list[CountedTrial]) -> None:  # ax: matplotlib Axes
    from matplotlib.collections import LineCollection

    lines = LineCollection(
        [list(t.valid_curve) for t in members], colors="C0", alpha=0.25, linewidths=0.8
    )
    ax.add_collection(lines)
    ax.scatter(
        [t.best_step for t in members],
        [t.best_valid for t in members],
        s=4,
        color="C0",
        zorder=3,
    )
    ax.autoscale_view()


def _label(summary: Summary, metric: str, classification: str) -> str:
    """An axis or title's name for a metric: `classification`'s words for a classification
    sweep (the default selection), else the metric's name."""
    return classification if summary.selection.is_default() else metric


def test_values(summary: Summary, path: Path) -> Path:
    """The test value (accuracy) of each trial per group (points), with mean and 95% CI
    (bar)."""
    groups = summary.groups
    figure = _figure(max(4.5, 1.6 * len(groups) + 1.5), 4.2)
    ax = figure.subplots()
    labelled: set[str] = set()

    def label(text: str) -> str | None:  # each legend entry once
        if text in labelled:
            return None
        labelled.add(text)
        return text

    for x, group in enumerate(groups):
        members: list[CountedTrial] = [t for t in summary.trials if t.group == group.group]
        offsets = _spread(len(members))
        ax.scatter(
            [x + o for o in offsets],
            [t.test_value for t in members],
            s=18 if len(members) <= 50 else 6,
            color="C0",
            alpha=0.7,
            zorder=2,
            label=label("trial"),
        )
        if group.ci_low is not None and group.ci_high is not None:
            err = [[group.mean - group.ci_low], [group.ci_high - group.mean]]
            ax.errorbar(
                [x + 0.3],
                [group.mean],
                yerr=err,
                fmt="s",
                color="C3",
                capsize=5,
                zorder=3,
                label=label("mean, 95% CI (t)"),
            )
        else:
            ax.plot(
                [x + 0.3],
                [group.mean],
                "s",
                color="C3",
                zorder=3,
                label=label("mean (n=1: no CI)"),
            )
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(
        [f"{g.group}\nn={g.n}" for g in groups], fontsize=8, rotation=20 if len(groups) > 4 else 0
    )
    ax.set_xlim(-0.6, len(groups) - 0.3)
    primary = summary.selection.primary
    ax.set_ylabel(_label(summary, primary, "test accuracy (%)") + " at best validation")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    shown = _label(summary, primary, "test accuracy")
    ax.set_title(f"{summary.sweep or summary.experiment}: {shown} per group", fontsize=11)
    figure.savefig(path)
    return path


def search_budget(summary: Summary, path: Path) -> Path:
    """Expected best search metric against the number of search trials, one line per group."""
    figure = _figure(5.6, 3.8)
    ax = figure.subplots()
    for i, group in enumerate(g for g in summary.search if g.expected_best):
        budgets, values = zip(*group.expected_best, strict=True)
        ax.plot(budgets, values, marker="o", color=f"C{i % 10}", label=group.group)
    ax.set_xlabel("search trials (n)")
    ax.set_ylabel(f"expected best {summary.search[0].metric}")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{summary.sweep or summary.experiment}: expected best vs budget", fontsize=11)
    figure.savefig(path)
    return path


def variance_sources(summary: Summary, path: Path) -> Path:
    """The variance table as bars: per group (one panel each, sharing the axis), the
    std of one trial's test value over each seed source varied, with its 95%
    chi-square interval, beside the test set's (bootstrap)."""
    groups: dict[str, list[VarianceRow]] = {}
    for row in summary.variance:
        groups.setdefault(row.group, []).append(row)
    heights = [0.45 * len(rows) + 0.7 for rows in groups.values()]
    figure = _figure(7.0, sum(heights) + 0.6)
    axes = figure.subplots(
        len(groups), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights}
    ).ravel()
    for ax, (group, rows) in zip(axes, groups.items(), strict=True):
        rows = [r for r in rows if r.std is not None]
        y = list(range(len(rows)))[::-1]
        colours = ["C3" if r.source == TEST_SET else "C0" for r in rows]
        ax.barh(y, [r.std for r in rows], color=colours, alpha=0.8, height=0.6)
        for yi, row in zip(y, rows, strict=True):
            if row.std_low is not None and row.std_high is not None:
                err = [[row.std - row.std_low], [row.std_high - row.std]]
                ax.errorbar([row.std], [yi], xerr=err, fmt="none", color="black", capsize=3)
        ax.set_yticks(y)
        ax.set_yticklabels([f"{variance_source(r.to_dict())}, n={r.n}" for r in rows], fontsize=8)
        ax.set_title(group, fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    unit = "points" if summary.selection.is_default() else "metric units"
    shown = _label(summary, summary.selection.primary, "test accuracy")
    axes[-1].set_xlabel(f"std of one trial's {shown}, {unit} (line: 95% chi-square interval)")
    figure.suptitle(
        f"{summary.sweep or summary.experiment}: where the variance comes from", fontsize=11
    )
    figure.savefig(path)
    return path


def _spread(n: int, width: float = 0.18) -> list[float]:
    """Deterministic horizontal offsets so equal values stay visible (no random jitter)."""
    if n <= 1:
        return [0.0]
    return [-width + 2 * width * i / (n - 1) for i in range(n)]
