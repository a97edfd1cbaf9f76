"""The report as files, and as artifacts and metrics of the sweep's parent run.

Logging the report back to MLflow keeps the sweep's record self-contained: whoever
opens the parent run in the MLflow UI finds the tables and figures beside the trials
they were computed from, and the per-group means are metrics that can be compared
across sweeps in the UI. Re-running the summary overwrites the artifacts and appends a
new value to each metric (MLflow shows the latest).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper import record_names
from sweeper.selection import best_metrics
from sweeper.summarize.figures import write_figures
from sweeper.summarize.html import REPORT_HTML, to_html
from sweeper.summarize.latex import to_latex
from sweeper.summarize.records import Comparison, Summary
from sweeper.summarize.tables import build_tables, table_csv, table_markdown, to_json, to_markdown

if TYPE_CHECKING:
    from mlflow import MlflowClient

SUMMARY_MD = "summary.md"
SUMMARY_JSON = "summary.json"
SUMMARY_TEX = "summary.tex"
METRIC_PREFIX = "summary"
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-./ ]")


@dataclass(frozen=True)
class Logged:
    """What `log_report` wrote to the parent run."""

    run_id: str
    artifact_dir: str
    artifacts: tuple[str, ...]
    metrics: dict[str, float]


def write_report(summary: Summary, out_dir: Path, figures: bool = True) -> list[Path]:
    """Write summary.md/.json/.tex (the .tex a LaTeX fragment: `sweeper.summarize.latex`),
    each table as .md and .csv, the figures, and report.html (all of it in one page)
    into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (
        (SUMMARY_MD, to_markdown(summary)),
        (SUMMARY_JSON, to_json(summary)),
        (SUMMARY_TEX, to_latex(summary)),
    ):
        (out_dir / name).write_text(text, encoding="utf-8")
        written.append(out_dir / name)
    for table in build_tables(summary):
        for suffix, text in (
            (".md", f"{table.title}\n\n{table_markdown(table)}"),
            (".csv", table_csv(table)),
        ):
            path = out_dir / f"{table.name}{suffix}"
            path.write_text(text, encoding="utf-8")
            written.append(path)
    drawn = write_figures(summary, out_dir) if figures else []
    page = out_dir / REPORT_HTML
    page.write_text(to_html(summary, drawn), encoding="utf-8")
    return [*written, *drawn, page]


def metric_name(*parts: str) -> str:
    """A valid MLflow metric name from free text: unsafe characters become `_`, and no
    path segment may be empty, `.` or `..` (MLflow rejects names that normalise away)."""
    segments = [_UNSAFE.sub("_", part).strip() for p in parts for part in p.split("/")]
    return "/".join(s if s not in {"", ".", ".."} else "_" for s in segments)


def group_metrics(summary: Summary) -> dict[str, float]:
    """Per-group test value (at each trial's best checkpoint; `test_accuracy` for a
    classification sweep) as metric values: mean and n, std and the 95% CI bounds where
    defined (n > 1), and the mean of each other reported test metric."""
    metrics: dict[str, float] = {}
    name = summary.selection.primary
    for group in summary.groups:
        metrics[metric_name(METRIC_PREFIX, group.group, f"{name}_mean")] = group.mean
        metrics[metric_name(METRIC_PREFIX, group.group, "n")] = float(group.n)
        if group.std is not None:
            metrics[metric_name(METRIC_PREFIX, group.group, f"{name}_std")] = group.std
        if group.ci_low is not None and group.ci_high is not None:
            metrics[metric_name(METRIC_PREFIX, group.group, f"{name}_ci_low")] = group.ci_low
            metrics[metric_name(METRIC_PREFIX, group.group, f"{name}_ci_high")] = group.ci_high
        for other, value in group.other_means.items():
            metrics[metric_name(METRIC_PREFIX, group.group, f"{other}_mean")] = value
    return metrics


def cost_metrics(summary: Summary) -> dict[str, float]:
    """The sweep's cost-ledger totals under the trial runs' own names (`cost/...`, the
    sums over every trial run of the sweep), and per group `summary/<group>/cpu_seconds`
    and `gpu_seconds` (Table 2's hours, in seconds) and `cost` with prices."""
    cost = summary.cost
    if cost is None:
        return {}
    total = cost.total
    metrics = {
        record_names.METRIC_COST_ATTEMPTS: float(total.attempts),
        record_names.METRIC_COST_LOST_ATTEMPTS: float(total.lost_attempts),
        record_names.METRIC_COST_CPU: total.cpu_seconds,
        record_names.METRIC_COST_GPU: total.gpu_seconds,
        record_names.METRIC_COST_LOST_CPU: total.lost_cpu_seconds,
        record_names.METRIC_COST_LOST_GPU: total.lost_gpu_seconds,
        record_names.METRIC_COST_CPU_TIME: total.cpu_time_seconds,
        record_names.METRIC_COST_GPU_TIME: total.gpu_time_seconds,
    }
    for group, spend in cost.groups.items():
        metrics[metric_name(METRIC_PREFIX, group, "cpu_seconds")] = spend.cpu_seconds
        metrics[metric_name(METRIC_PREFIX, group, "gpu_seconds")] = spend.gpu_seconds
        money = cost.money(spend)
        if money is not None:
            metrics[metric_name(METRIC_PREFIX, group, "cost")] = money
    return metrics


def comparison_metrics(summary: Summary) -> dict[str, float]:
    """Per comparison (`summary/compare/<A - B>/<within>/...`): the difference, the
    decision interval and its look where the rule has them, and the decision as
    numbers: `decided` 1 for "better" or "equivalent", 0 for undecided; `a_better` +1
    (A better), -1 (B better) or 0; `equivalent` 1 or 0; where its trials hold test
    predictions, what the test set can resolve (`_test_set_values`)."""
    metrics: dict[str, float] = {}
    for c in summary.comparisons:
        base = (METRIC_PREFIX, "compare", c.kind, c.within)
        values = {
            "diff": c.diff,
            "decision_low": c.decision_low,
            "decision_high": c.decision_high,
            "look": c.look,
            "n_pairs": c.n_decision if c.n_decision is not None else c.n_pairs,
            "decided": float(c.decision != "undecided"),
            "a_better": _direction(c),
            "equivalent": float(c.decision.startswith("equivalent")),
            **_test_set_values(c),
        }
        for key, value in values.items():
            if value is not None:
                metrics[metric_name(*base, key)] = float(value)
    return metrics


def variance_metrics(summary: Summary) -> dict[str, float]:
    """The variance table's std and variance per group and source
    (`summary/<group>/variance/<source>/std`; source `all`, `init`, `data_order`,
    `dropout` or `test_set`), where defined, and the trials each is over (`n`)."""
    metrics: dict[str, float] = {}
    for row in summary.variance:
        base = (METRIC_PREFIX, row.group, "variance", row.source)
        for key, value in (("std", row.std), ("variance", row.variance), ("n", row.n)):
            if value is not None:
                metrics[metric_name(*base, key)] = float(value)
    return metrics


def _direction(c: Comparison) -> float:
    if c.decision == f"{c.group_a} better":
        return 1.0
    return -1.0 if c.decision == f"{c.group_b} better" else 0.0


def digest(summary: Summary, figures: bool = True) -> str:
    """What identifies a report: the sha256 of its summary.json (every number, run id,
    note and tracking URI in it; tables and figures are drawn from the same records),
    and whether it has its figures: a report logged without them (`sweeper run`'s, by
    default) is not the one `sweeper summarize` would log, so that one logs again."""
    text = to_json(summary) + ("" if figures else "\0without figures")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def unchanged(summary: Summary) -> bool:
    """True when the parent run already holds this very report and every counted trial
    has its best-checkpoint metrics: logging again would add nothing."""
    return not summary.unmarked and summary.logged_digest == digest(summary)


def log_report(
    client: MlflowClient, summary: Summary, files: Sequence[Path], figures: bool = True
) -> Logged | None:
    """Log `files` (from write_report; `figures`: drawn among them) and the group
    metrics to the parent run, then tag it with the report's digest (`unchanged` reads
    it back).

    Returns None when the experiment has no parent run. Only the report's own files are
    logged, never the rest of a user's --out folder.
    """
    from mlflow.entities import Metric

    if summary.parent_run_id is None:
        return None
    run_id = summary.parent_run_id
    for path in files:
        client.log_artifact(run_id, str(path), artifact_path=record_names.ARTIFACT_REPORT_DIR)
    metrics = {
        **group_metrics(summary),
        **comparison_metrics(summary),
        **cost_metrics(summary),
        **variance_metrics(summary),
    }
    now = int(time.time() * 1000)
    entries = [Metric(key, value, now, 0) for key, value in metrics.items()]
    for start in range(0, len(entries), 1000):  # MLflow's log_batch limit
        client.log_batch(run_id, metrics=entries[start : start + 1000])
    mark_best_checkpoints(client, summary)
    client.set_tag(run_id, record_names.TAG_REPORT_DIGEST, digest(summary, figures))
    names = tuple(sorted(Path(p).name for p in files))
    return Logged(run_id, record_names.ARTIFACT_REPORT_DIR, names, metrics)


def mark_best_checkpoints(client: MlflowClient, summary: Summary) -> int:
    """Give each counted trial run that lacks them its best-checkpoint metrics (what a
    finished trial logs itself, `tune.trainable.best_points`), from Table 1's row, at
    the best step; returns how many runs were marked."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    unmarked = set(summary.unmarked)
    for trial in (t for t in summary.trials if t.run_id in unmarked):
        tests = {summary.selection.primary: trial.test_value, **trial.other_tests}
        values = best_metrics(
            trial.best_valid, tests, trial.best_step, trial.best_epoch, summary.selection
        )
        entries = [Metric(k, v, now, trial.best_step) for k, v in values.items()]
        client.log_batch(trial.run_id, metrics=entries)
    return len(unmarked)


def _test_set_values(c: Comparison) -> dict[str, float | None]:
    """What the comparison's test set can resolve, where its trials hold predictions:
    the interval over the examples, the combined McNemar p, the seeds x examples
    interval, the resolution X and whether the difference lies below it (1 or 0)."""
    stats = c.test_set
    if stats is None:
        return {}
    return {
        "test_set_low": stats.low,
        "test_set_high": stats.high,
        "p_mcnemar": stats.p_mcnemar,
        "seeds_x_examples_low": stats.combined_low,
        "seeds_x_examples_high": stats.combined_high,
        "resolution": stats.resolution,
        "below_resolution": float(stats.below_resolution),
    }
