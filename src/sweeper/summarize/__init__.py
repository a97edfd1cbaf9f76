"""`sweeper summarize`: a sweep's MLflow record turned into tables, statistics and figures.

  source.py       which reader a store gets: SQL on a local SQLite file, REST for a
                  tracking server, else MLflow
  sqlite_store.py the SQLite reader (read-only SQL, no MLflow import)
  http_store.py   the tracking-server reader (REST, parallel, exact bulk histories; no
                  MLflow import)
  mlflow_reader.py MLflow -> RunRecords and metric histories (bulk where the store allows)
  records.py      the plain records every step passes on (runs, trials, groups, comparisons)
  select.py       which runs count; best-validation checkpoint per trial (Table 1)
  example_reader.py  the counted trials' per-example predictions, from their artifacts
  stats.py        Table 2 per group (t and bootstrap CIs, uncounted runs by outcome); the
                  tests: Welch, paired t, Wilcoxon, bootstrap
  resampling.py   the BCa bootstrap and the Wilcoxon p on numpy (scipy's procedures)
  exact.py        the exact sign-flip test of seed-matched differences (and its TOST)
  compare.py      which groups are compared (every axis that varies), paired or not; P(A>B)
  variance.py     where the variance comes from: each group's seed variance by the seed
                  source varied, and the test set's (bootstrap over its examples)
  assumptions.py  what the t-based decisions assume, checked: skewed differences,
                  collapsed trials
  decide.py       seeds fixed in advance: Holm (or, with a margin, Bonferroni intervals),
                  gated by the exact sign-flip test, a decision each, seeds needed; ASO
  resolution.py   what the test set can resolve: per comparison, the bootstrap over test
                  examples, the seed pairs' exact McNemar tests combined, the seeds x
                  examples interval (`--population` decides by it), the resolution X
  resolution_text.py  the same in the comparisons table's columns and the paragraph
  sequential.py   seeds added until decided: the walk over the looks, anytime-valid
                  confidence sequences
  group_sequential.py  the recorded plan's boundaries (alpha spending), t at each look
  sequential_power.py  seeds needed at a stated power under a sequential rule (simulated)
  search.py       the search stage per group: best configuration, Optuna importances
  budget.py       expected best search score vs number of search trials (Dodge et al.)
  costs.py        the cost ledger's totals summed (Spend), prices, "seeds needed" priced
  spend.py        the ledger in the summary: Table 2's hours, the sweep's line, estimates
  cells.py        how a value reads in a cell (rounding, "n/a"), for tables and paragraph
  tables.py       the tables; markdown / CSV / JSON rendering of the same records
  paragraph.py    the results in words, quoting the tables' cells
  terminal.py     the same tables on a terminal (rich on a TTY, plain text otherwise)
  html.py         the report as one HTML page
  latex.py        booktabs tables and the paragraph as a LaTeX fragment (summary.tex)
  figures.py      validation curves per group; test accuracy per group
  report.py       report files, and logging them to the sweep's parent run
  evaluate.py     `--evaluate`: each best checkpoint re-measured by its framework
  request.py      `SummaryRequest`, what one summary asks for; `of_spec` turns a spec
                  into one (its store by `sweeper.deploy.resolve`)
  sweep_runs.py   the reading step: the sweep's runs and which trials count, at which
                  checkpoint
  core.py         `summarize(request)`, the front door every summary enters by (the
                  CLI, `sweeper run`'s closing report, `--until-decided`): reads the
                  sweep, computes Table 2, the comparisons and the costs

Importing this package loads neither mlflow, scipy, statsmodels nor matplotlib; they
load inside the functions that need them.
"""

from __future__ import annotations

from sweeper.summarize.core import summarize
from sweeper.summarize.mlflow_reader import SummarizeError
from sweeper.summarize.records import (
    Comparison,
    CountedTrial,
    GroupStats,
    NotCounted,
    Point,
    RunRecord,
    Summary,
)
from sweeper.summarize.report import log_report, write_report
from sweeper.summarize.request import SummaryRequest

__all__ = [
    "Comparison",
    "CountedTrial",
    "GroupStats",
    "NotCounted",
    "Point",
    "RunRecord",
    "SummarizeError",
    "Summary",
    "SummaryRequest",
    "log_report",
    "summarize",
    "write_report",
]
