"""Tables, statistics and figures from a sweep's MLflow runs.

Reads the trial runs of one sweep and reports:
  Table 1      per trial: best validation accuracy, its step and epoch, the test
               accuracy at that same step (ties: earliest step), wall time
  Table 2      per group (framework/init/method[params]): n, mean test accuracy,
               sample std (ddof=1), 95% CI (t and bootstrap), min, max, mean best
               step, trainable params, and the group's runs not counted (failed,
               diverged, early-stopped, unfinished)
  comparisons  every pair of groups that differ on one axis (framework, init, method
               or a grid parameter): the difference, its 95% CI (t; bootstrap from 21
               seeds), a paired t-test on seed-matched differences (Wilcoxon beside it
               where it can reach alpha; Welch when seeds do not pair), P(A>B) and d_z,
               and a decision at family-wise --alpha: "<group> better", "equivalent
               within ±D" (with --margin D) or "undecided" with the seeds an estimate
               from the observed effect says would decide. Seeds fixed in advance:
               Holm-adjusted p (with a margin: each comparison's Bonferroni t
               interval). After `sweeper run --until-decided`: the group-sequential
               interval of the plan recorded on the sweep's run (anytime-valid for
               older plans and seeds past a plan), at the look that decided; the
               fixed-n p is then shown for reference only
  not counted  failed, interrupted, running, early-stopped and duplicate runs,
               search-stage trials, and runs with no test accuracy at their best
               validation step, each with the reason
  results      a paragraph in words: each group's mean and CI, and each comparison's
               outcome, difference, pairs and the interval it was decided from
  variance     where each group's variance comes from: the seed-to-seed std and
               variance (95% chi-square intervals) per seed source the sweep varied
               (all at once, or init / data order / dropout alone), beside the test
               set's, the variance a new test set would add (a bootstrap over the test
               examples of the trials' stored predictions); shown whenever a group
               varied one source or its trials hold predictions (figure variance.png)
  cost         CPU-hours (GPU-hours where trials held GPUs) per group in Table 2 and
               for the sweep, every attempt counted; with the spec's `cost:` block (or
               the one the sweep recorded) money too; an undecided comparison's seeds
               needed come with the trials and hours they would take
Only runs that finished (MLflow status and sweeper.status tag) count, one per trial
key (the earliest-started). Accuracies are percentages. Groups of fewer than 3 runs
are flagged; with n = 1 std and CIs read "n/a".

The metric is the spec's `select:` (default: best checkpoint by valid_accuracy, test
accuracy reported). --metric NAME builds everything on another measurement instead:
`--metric macro_f1` picks each trial's best checkpoint by valid_macro_f1 and reports
test_macro_f1 (macro-F1 in %, the mean of per-class F1 over the classes present), the
sweep's other reported metrics beside it. The trainers store the checkpoint the
sweep's own `select:` picks, so --evaluate checks a --metric summary only when both
pick on the same metric.

With --evaluate, each counted trial's best checkpoint is downloaded from MLflow,
reloaded with its framework (fairseq's hub interface, transformers / PEFT
from_pretrained) and run on the prepared test split again; any trial whose re-measured
accuracy (or macro-F1, exact match) is not exactly the recorded one is reported (both
come from counts through one function; a loss or perplexity may differ by 0.01), and
so is any whose stored test predictions (runs tagged sweeper.predictions) the
checkpoint does not repeat example by example ("ok (189 of 189 examples agree)", or
how many differ and their first ids): one line
per trial after the report, as it is measured, the last with the tally; the table goes
to --out and the parent run (evaluation.md), and with --format markdown/csv/json/latex
follows the report too. This needs the trials' prepared data on this machine and loads
torch, so it takes a while. fairseq's and transformers' log lines go to the
third-party log (`-v`: to the terminal).

What the test set can resolve: where the trials hold per-example test predictions
(their `predictions/test.json` artifacts), each comparison also shows the bootstrap
interval of the difference over the test examples (each group's trials pooled), the
seed pairs' exact McNemar tests combined, and the seeds x examples interval (other
seeds and another test set of the same size). Where the difference lies below what the
test set can resolve, the note says "with N test examples, no number of seeds decides
a difference below ±X points" and seeds needed is not offered. --population makes the
seeds x examples interval the one that decides (the claim about the population, not
about this test set; seeds fixed in advance only).

--format latex prints Table 1, Table 2 and the comparisons as booktabs tables with the
results paragraph: a fragment to paste into a paper (needs \\usepackage{booktabs,graphicx}).

Unless --no-log, the report (summary.md, summary.json, summary.tex, tables as
.md/.csv, figures curves.png and test_accuracy.png, search_budget.png after a search,
variance.png with a variance table) is logged to the sweep's parent run under report/,
and each group's mean test accuracy as a metric `summary/<group>/test_accuracy_mean`; a
report identical to the one the parent run already holds (same runs, same numbers) is
not logged again, so summarising an unchanged sweep reads and prints only. A local
SQLite store is read with SQL, and a tracking server over its REST API, without
loading MLflow.

examples:
  sweeper summarize sweeps/demo.yaml
  sweeper summarize sweeps/demo.yaml --out runs/demo/report
  sweeper summarize --experiment demo --tracking-uri sqlite:///runs/demo/mlflow.db
  sweeper summarize sweeps/roberta.yaml --format markdown > results.md
  sweeper summarize sweeps/roberta.yaml --format latex --no-log > results.tex
  sweeper summarize sweeps/demo.yaml --evaluate
  sweeper summarize sweeps/demo.yaml --metric macro_f1
  MLFLOW_TRACKING_URI=http://127.0.0.1:5000 sweeper summarize --experiment roberta \\
      --format json --no-log | jq '.groups[] | {group, mean, std}'

exit status: 0 once summarised (even when some runs are not counted); 1 if the report
could not be logged to MLflow, or --evaluate found a checkpoint that disagrees with the
record or could not be measured; 2 for bad input (spec error, no tracking store given,
unknown experiment, unreachable store).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.cli.common import add_margin_argument, fail, load_or_exit
from sweeper.logs import place_log, quiet_root_logger

if TYPE_CHECKING:
    from collections.abc import Callable

    from sweeper.spec.schema import SweepSpec
    from sweeper.summarize import Summary
    from sweeper.summarize.evaluate import Evaluation
    from sweeper.summarize.request import SummaryRequest

FORMATS = ("terminal", "markdown", "csv", "json", "latex")


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "spec", nargs="?", metavar="SPEC", help="sweep file; gives the store and experiment"
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="FIELD=VALUE",
        help="dotted spec overrides, e.g. tracking.uri=sqlite:////abs/mlflow.db",
    )
    parser.add_argument(
        "--experiment", metavar="NAME", help="MLflow experiment (default: the spec's)"
    )
    parser.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="MLflow tracking URI (default: the spec's, else $MLFLOW_TRACKING_URI, else a "
        "running `sweeper cluster up`'s server, else SQLite in output_dir)",
    )
    parser.add_argument(
        "--sweep",
        metavar="NAME",
        help="only runs tagged with this sweep name (needed if the experiment holds several)",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="terminal",
        help="stdout format (default: terminal tables; csv: each table after a '# name' "
        "line; latex: booktabs tables and the results paragraph, a fragment for a paper)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        help="also write summary.md/.json/.tex, table1/table2/comparisons/not_counted .md "
        "and .csv, and the figures into DIR",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        metavar="A",
        help="family-wise error rate the comparisons are decided at, after Holm's "
        "correction (default: 0.05)",
    )
    add_margin_argument(
        parser,
        "default: the spec's compare.margin, else the margin an --until-decided plan "
        "recorded, else none",
    )
    parser.add_argument(
        "--aso",
        action="store_true",
        help="add Almost Stochastic Order (Dror et al. 2019, deepsig) to each comparison: "
        "epsilon_min < 0.5 means A tends to score higher (slow: seconds per comparison)",
    )
    parser.add_argument(
        "--metric",
        metavar="NAME",
        help="the measurement the tables, comparisons and figures are about, e.g. "
        "macro_f1: each trial's best checkpoint by valid_NAME (its own direction), "
        "test_NAME reported first, the sweep's other reported metrics beside it "
        "(default: the spec's select:, else what the sweep recorded)",
    )
    parser.add_argument(
        "--evaluate",
        action="store_true",
        help="re-measure the reported test metric (accuracy, macro-F1, ...) from each "
        "trial's stored best checkpoint and report "
        "mismatches with the recorded value (loads the frameworks; needs the prepared data)",
    )
    parser.add_argument(
        "--recompute",
        action="store_true",
        help="pick every trial's best checkpoint from its metric histories, not from the "
        "best-checkpoint metrics its run carries (slower through a server: it checks "
        "what the trials recorded, which a summary otherwise reads)",
    )
    parser.add_argument(
        "--population",
        action="store_true",
        help="decide each comparison whose trials hold test predictions by its seeds x "
        "examples interval (other seeds and another test set of the same size), not by "
        "the seeds alone on this test set (seeds fixed in advance only)",
    )
    parser.add_argument(
        "--no-log",
        action="store_true",
        help="do not log the report to the sweep's parent run (read-only use)",
    )


def run(args: argparse.Namespace) -> int:
    from sweeper.summarize import SummarizeError, summarize
    from sweeper.summarize.tables import to_csv, to_json, to_markdown
    from sweeper.summarize.terminal import print_terminal

    if not 0.0 < args.alpha < 1.0:
        fail(f"--alpha must lie between 0 and 1, got {args.alpha}")
    try:
        summary = summarize(request_of(args))
    except SummarizeError as exc:
        fail(str(exc))

    if args.format == "json":
        sys.stdout.write(to_json(summary))
    elif args.format == "csv":
        sys.stdout.write(to_csv(summary))
    elif args.format == "markdown":
        sys.stdout.write(to_markdown(summary))
    elif args.format == "latex":
        from sweeper.summarize.latex import to_latex

        sys.stdout.write(to_latex(summary))
    else:
        print_terminal(summary)
    sys.stdout.flush()
    evaluations = _evaluate(summary, args.format) if args.evaluate else None
    status = _write_and_log(summary, args.out, not args.no_log, evaluations)
    if evaluations is not None:
        from sweeper.summarize.evaluate import mismatches

        bad = mismatches(evaluations)
        if bad:
            names = ", ".join(e.run_name for e in bad)
            print(f"error: {len(bad)} stored checkpoint(s) disagree: {names}", file=sys.stderr)
            return 1
    return status


def _evaluate(summary: Summary, fmt: str) -> list[Evaluation]:
    """Re-measure Table 1's trials, one line per trial as it is measured (the last one
    with the tally). In the terminal format those lines are the result, on stdout
    (the table goes to --out and the parent run); otherwise they go to stderr and the
    table follows the report: on stdout in markdown, on stderr when stdout carries
    machine-readable csv/json or a LaTeX fragment."""
    from sweeper.summarize.evaluate import evaluate_trials, to_markdown
    from sweeper.summarize.mlflow_reader import open_client

    client = open_client(summary.tracking_uri)
    lines = sys.stdout if fmt == "terminal" else sys.stderr

    def progress(line: str) -> None:
        quiet_root_logger()  # the reload loaded fairseq / transformers (sweeper.logs)
        print(line, file=lines, flush=True)

    metric = summary.selection.primary
    evaluations = evaluate_trials(client, summary.trials, progress, metric)
    if fmt != "terminal":
        stream = sys.stdout if fmt == "markdown" else sys.stderr
        print("\n" + to_markdown(evaluations, metric), file=stream, end="", flush=True)
    return evaluations


def request_of(args: argparse.Namespace) -> SummaryRequest:
    """The summary the command line asks for: the spec's (`SummaryRequest.of_spec`,
    the flags overriding it), or without a spec the experiment named, in the store
    `--tracking-uri`, $MLFLOW_TRACKING_URI or a running cluster names; exit 2 if
    neither is given. Without a spec nothing is compared, and the selection is the
    one the sweep run records."""
    from sweeper.summarize.request import SummaryRequest

    if args.spec is None:
        if args.overrides:
            fail("FIELD=VALUE overrides need a SPEC")
        if not args.experiment:
            fail("give a SPEC, or --experiment NAME (with --tracking-uri URI)")
        from sweeper.deploy.resolve import tracking_uri_without_spec
        from sweeper.tracking.store import sqlite_path

        uri = tracking_uri_without_spec(args.tracking_uri)
        if not uri:
            fail(
                "no tracking store: pass --tracking-uri URI, set MLFLOW_TRACKING_URI, or "
                "start a cluster with `sweeper cluster up`"
            )
        db = sqlite_path(uri)
        if db is not None:  # the third-party log lies beside the store
            place_log(db.parent)
        return SummaryRequest(
            experiment=args.experiment,
            tracking_uri=uri,
            sweep=args.sweep,
            metric=_metric(args, None),
            margin=args.margin,
            alpha=args.alpha,
            aso=args.aso,
            recompute=args.recompute,
            population=args.population,
        )
    spec = load_or_exit(args.spec, args.overrides)
    return SummaryRequest.of_spec(
        spec,
        tracking_uri=args.tracking_uri,
        experiment=args.experiment,
        sweep=args.sweep,
        margin=args.margin,
        metric=_metric(args, spec),
        alpha=args.alpha,
        aso=args.aso,
        recompute=args.recompute,
        population=args.population,
    )


def _metric(args: argparse.Namespace, spec: SweepSpec | None) -> str | None:
    """`--metric` as a measurement name (`macro_f1`; `valid_`/`test_` dropped); exit 2
    for one no trainer of the spec's task measures (`record_names.TASK_METRICS`; any
    task's without a spec)."""
    if args.metric is None:
        return None
    from sweeper import record_names
    from sweeper.selection import base_name

    name = base_name(args.metric)
    if spec is not None:
        known = record_names.TASK_METRICS[spec.task]
    else:
        known = tuple(dict.fromkeys(m for ms in record_names.TASK_METRICS.values() for m in ms))
    if name not in known:
        fail(f"--metric {args.metric}: no trainer measures it; one of {', '.join(known)}")
    return name


def _write_and_log(
    summary: Summary, out: Path | None, log: bool, evaluations: list[Evaluation] | None
) -> int:
    """Write the report (with evaluation.md/.json after --evaluate) to --out and/or log
    it to the parent run; 1 if MLflow refuses. A report identical to the one the parent
    run already holds is not logged again (`sweeper.summarize.report.unchanged`)."""
    from sweeper.summarize import write_report
    from sweeper.summarize.core import with_curves
    from sweeper.summarize.evaluate import write as write_evaluation
    from sweeper.summarize.report import unchanged

    def report(folder: Path) -> list[Path]:
        files = write_report(with_curves(summary), folder)
        if evaluations is None:
            return files
        return files + write_evaluation(evaluations, folder, summary.selection.primary)

    if out is not None:
        written = report(out)
        print(f"wrote {len(written)} files to {out}", file=sys.stderr)
    if not log:
        return 0
    if summary.parent_run_id is None:
        print(
            "note: no parent (sweep) run in this experiment; the report is not logged to MLflow",
            file=sys.stderr,
        )
        return 0
    if evaluations is None and unchanged(summary):
        print(
            f"report unchanged since it was logged to parent run {summary.parent_run_id}",
            file=sys.stderr,
        )
        return 0
    return _log(summary, lambda folder: written if out is not None else report(folder))


def _log(summary: Summary, files: Callable[[Path], list[Path]]) -> int:
    from mlflow.exceptions import MlflowException

    from sweeper.summarize import log_report
    from sweeper.summarize.mlflow_reader import open_client

    try:
        with tempfile.TemporaryDirectory(prefix="sweeper-report-") as tmp:
            logged = log_report(open_client(summary.tracking_uri), summary, files(Path(tmp)))
    except (MlflowException, OSError) as exc:
        print(f"error: could not log the report to MLflow: {exc}", file=sys.stderr)
        return 1
    if logged is not None:
        print(
            f"report logged to parent run {logged.run_id} under {logged.artifact_dir}/ "
            f"({len(logged.artifacts)} files, {len(logged.metrics)} metrics)",
            file=sys.stderr,
        )
    return 0
