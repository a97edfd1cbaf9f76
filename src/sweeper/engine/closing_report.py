"""The summary a finished `sweeper run` prints and logs to the sweep's parent run.

The tables are the summariser's own (`sweeper summarize` prints the same), read back
from the store, so what the run prints is what the record holds.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from sweeper.spec.schema import SweepSpec


def summarise(
    spec: SweepSpec,
    uri: str,
    client: MlflowClient,
    notes: Sequence[str] = (),
    figures: bool = False,
) -> None:
    """Print the summariser's tables and log its report to the parent run; `notes` are
    the driver's own lines for the report (why `--until-decided` stopped).

    Figures only when asked (`sweeper run --figures`): drawing them (matplotlib) would
    slow down every run's end, for files nobody looks at before `sweeper summarize`,
    which draws and logs them (the report logged here is marked as figure-less)."""
    import tempfile

    from sweeper.selection import Selection
    from sweeper.summarize import SummarizeError, log_report, summarize, write_report
    from sweeper.summarize.core import prices_of, with_curves
    from sweeper.summarize.terminal import print_terminal
    from sweeper.tracking import experiment_name
    from sweeper.tracking.inputs import inputs_fingerprint

    try:
        summary = summarize(
            experiment_name(spec), uri, sweep=spec.name, client=client,
            inputs=inputs_fingerprint(spec), selection=Selection.of(spec.select),
            margin=spec.compare.margin, prices=prices_of(spec),
        )  # fmt: skip
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
