"""Where a sweep's record and outputs live when it runs on a cluster.

  state.py      the state file of a `sweeper cluster up` cluster: addresses, storage,
                the process groups it started; whether that cluster is still running
  resolve.py    the one tracking-URI precedence every command uses, and the Ray job
                working-dir copy: detecting it and re-rooting a sweep's outputs onto
                durable storage (docs/architecture.md, invariant 7)
  local.py      `sweeper cluster up | status | down`: a Ray head and an MLflow tracking
                server as real processes on this machine
  up_checks.py  what `up` checks and sets first: ports (TIME_WAIT is free), the
                backend store's driver, this environment first on the head's PATH

The package sits just above `tracking` (it asks `tracking.server` whether a server
answers, `tracking.drivers` whether a database's driver is installed) and below the
engine and the CLI, which use it. Nothing here imports Ray or MLflow at module level:
`sweeper --help` stays light (invariant 4).
"""

from __future__ import annotations
