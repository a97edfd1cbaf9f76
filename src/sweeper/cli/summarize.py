"""Tables, statistics and figures from a sweep's MLflow runs.

Reads the trial runs of one sweep and reports:
  Table 1      per trial: best validation accuracy, its step and epoch, the test
               accuracy at that same step (ties: earliest step), wall time
  Table 2      per group (framework/init/method): n, mean test accuracy, sample std
               (ddof=1), 95% CI (t), min, max, mean best step, trainable params
  comparisons  pretrained vs random within each framework, fairseq vs HF within each
               init: difference of means, Welch 95% CI and t-test p-value
  not counted  failed, interrupted, running, early-stopped and duplicate runs,
               search-stage trials, and runs with no test accuracy at their best
               validation step, each with the reason
Only runs that finished (MLflow status and sweeper.status tag) count, one per trial
key (the earliest-started). Accuracies are percentages. Groups of fewer than 3 runs
are flagged; with n = 1 std and CIs read "n/a".

Unless --no-log, the report (summary.md, summary.json, tables as .md/.csv, figures
curves.png and test_accuracy.png) is logged to the sweep's parent run under report/,
and each group's mean test accuracy as a metric `summary/<group>/test_accuracy_mean`.

examples:
  sweeper summarize sweeps/demo.yaml
  sweeper summarize sweeps/demo.yaml --out runs/demo/report
  sweeper summarize --experiment demo --tracking-uri sqlite:///runs/demo/mlflow.db
  sweeper summarize sweeps/roberta.yaml --format markdown > results.md
  MLFLOW_TRACKING_URI=http://127.0.0.1:5000 sweeper summarize --experiment roberta \\
      --format json --no-log | jq '.groups[] | {group, mean, std}'

exit status: 0 once summarised (even when some runs are not counted); 1 if the report
could not be logged to MLflow; 2 for bad input (spec error, no tracking store given,
unknown experiment, unreachable store).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.cli.common import fail, load_or_exit

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from sweeper.summarize import Summary

FORMATS = ("terminal", "markdown", "csv", "json")


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
        help="MLflow tracking URI (default: the spec's, else $MLFLOW_TRACKING_URI)",
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
        help="stdout format (default: terminal tables; csv: each table after a '# name' line)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        help="also write summary.md/.json, table1/table2/comparisons/not_counted .md and "
        ".csv, and the figures into DIR",
    )
    parser.add_argument(
        "--no-log",
        action="store_true",
        help="do not log the report to the sweep's parent run (read-only use)",
    )


def run(args: argparse.Namespace) -> int:
    from sweeper.summarize import SummarizeError, summarize
    from sweeper.summarize.load import open_client
    from sweeper.summarize.tables import print_rich, to_csv, to_json, to_markdown, to_plain

    experiment, uri, sweep = _resolve(args)
    try:
        client = open_client(uri)
        summary = summarize(experiment, uri, sweep=sweep, client=client)
    except SummarizeError as exc:
        fail(str(exc))

    if args.format == "json":
        sys.stdout.write(to_json(summary))
    elif args.format == "csv":
        sys.stdout.write(to_csv(summary))
    elif args.format == "markdown":
        sys.stdout.write(to_markdown(summary))
    elif sys.stdout.isatty():
        print_rich(summary, sys.stdout)
    else:
        sys.stdout.write(to_plain(summary))
    sys.stdout.flush()
    return _write_and_log(client, summary, args.out, log=not args.no_log)


def _resolve(args: argparse.Namespace) -> tuple[str, str, str | None]:
    """(experiment, tracking URI, sweep) from the spec and/or the flags; exit 2 if unknown."""
    if args.spec is None:
        if args.overrides:
            fail("FIELD=VALUE overrides need a SPEC")
        if not args.experiment:
            fail("give a SPEC, or --experiment NAME (with --tracking-uri URI)")
        uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            fail("no tracking store: pass --tracking-uri URI or set MLFLOW_TRACKING_URI")
        return args.experiment, uri, args.sweep
    from sweeper.tracking import experiment_name, tracking_uri

    spec = load_or_exit(args.spec, args.overrides)
    return (
        args.experiment or experiment_name(spec),
        args.tracking_uri or tracking_uri(spec),
        args.sweep or spec.name,
    )


def _write_and_log(client: MlflowClient, summary: Summary, out: Path | None, log: bool) -> int:
    """Write the report to --out and/or log it to the parent run; 1 if MLflow refuses."""
    from mlflow.exceptions import MlflowException

    from sweeper.summarize import log_report, write_report

    if out is not None:
        written = write_report(summary, out)
        print(f"wrote {len(written)} files to {out}", file=sys.stderr)
    if not log:
        return 0
    if summary.parent_run_id is None:
        print(
            "note: no parent (sweep) run in this experiment; the report is not logged to MLflow",
            file=sys.stderr,
        )
        return 0
    try:
        with tempfile.TemporaryDirectory(prefix="sweeper-report-") as tmp:
            files = written if out is not None else write_report(summary, Path(tmp))
            logged = log_report(client, summary, files)
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
