"""The sweep engine: what `sweeper run` does, with no command line in it.

  options.py    RunOptions (the run's options, typed), SweepError (message + exit status)
  preflight.py  every input file checked before anything is written
  resources.py  every trial fits on some node, checked before anything is written
  signals.py    Ctrl-C / SIGTERM: Tune's graceful stop, exit 130 / 143
  store.py      open the tracking store and plan the runs (the resume rules)
  sweep.py      Sweep: a grid with its store open; prepare the inputs once
  session.py    the Ray session: join a cluster or start Ray here, stop what was started
  grid.py       run a planned grid on Ray Tune and record it (also the confirm stage's)
  report.py     the summary printed at the end and logged to the parent run
  until_decided.py  --until-decided: more seeds for the groups of undecided comparisons

The CLI (`cli/run.py`) parses, builds RunOptions, calls `grid.run_grid_sweep` or
`sweeper.search.run.run_search` (which builds on this package), prints a
SweepError's message and exits with its status. Nothing here imports the CLI.
Heavy libraries (Ray, MLflow, torch) are imported inside functions.
"""

from __future__ import annotations

from sweeper.engine.options import EXIT_BAD_INPUT, EXIT_FAILED, RunOptions, SweepError

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "RunOptions", "SweepError"]
