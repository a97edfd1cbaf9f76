"""The summary a finished `sweeper run` prints and logs to the sweep's parent run.

The tables are the summariser's own, read back from the store through the one front
door (`sweeper.summarize.summarize`) with the request `sweeper summarize SPEC` builds
for the same spec and store (`SummaryRequest.of_spec`), so what the run prints is what
the record holds and what `sweeper summarize` prints afterwards. The `--until-decided`
loop looks at the same request between its batches.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sweeper.engine.sweep import Sweep
    from sweeper.summarize.request import SummaryRequest


def summary_request(sweep: Sweep) -> SummaryRequest:
    """What the run summarises: the sweep's spec in the store the run opened."""
    from sweeper.summarize.request import SummaryRequest

    return SummaryRequest.of_spec(sweep.spec, tracking_uri=sweep.uri)


def summarise(sweep: Sweep, notes: Sequence[str] = ()) -> None:
    """Print the summariser's tables and log its report to the parent run; `notes` are
    the driver's own lines for the report (why `--until-decided` stopped).

    Figures only when asked (`sweeper run --figures`): drawing them (matplotlib) would
    slow down every run's end, for files nobody looks at before `sweeper summarize`,
    which draws and logs them (the report logged here is marked as figure-less)."""
    import tempfile

    from sweeper.summarize import SummarizeError, log_report, summarize, write_report
    from sweeper.summarize.core import with_curves
    from sweeper.summarize.terminal import print_terminal

    client, figures = sweep.client, sweep.options.figures
    try:
        summary = summarize(summary_request(sweep), client)
    except SummarizeError as exc:
        print(f"warning: no summary: {exc}", file=sys.stderr)
        return
    summary.notes.extend(notes)
    print()
    print_terminal(summary)
    with tempfile.TemporaryDirectory(prefix="sweeper-report-") as tmp:
        if figures:
            summary = with_curves(summary, client)
        log_report(client, summary, write_report(summary, Path(tmp), figures), figures)
