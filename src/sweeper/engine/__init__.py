"""The sweep engine: what `sweeper run` does, with no command line in it.

  options.py        RunOptions (the run's options, typed), Budget (--until-decided's
                    limits), SweepError (message + exit status)
  preflight.py      every input file checked before anything is written
  resources.py      every trial fits on some node, checked before anything is written
  signals.py        Ctrl-C / SIGTERM: Tune's graceful stop, exit 130 / 143
  open_store.py     open the tracking store and plan the runs (the resume rules); the lease
  sweep.py          Sweep: a grid with its store open; prepare the inputs once
  session.py        the Ray session: join a cluster or start Ray here, stop what was started
  stage_graph.py    which stage (pretraining) runs beside the trials that do not need it
  grid.py           run a planned grid on Ray Tune and record it (also the confirm stage's)
  closing_report.py the summary printed at the end and logged to the parent run
  until_decided.py  --until-decided: its plan recorded, more seeds for undecided groups

`sweeper.api.run_sweep` is the one call that drives it (the CLI's `sweeper run` and
Python callers alike); the search stage (`sweeper.search`) builds on it. Nothing here
imports the CLI. Heavy libraries (Ray, MLflow, torch) are imported inside functions.
"""

from __future__ import annotations

from sweeper.engine.options import EXIT_BAD_INPUT, EXIT_FAILED, RunOptions, SweepError

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "RunOptions", "SweepError"]
