"""A sweep's MLflow record, shared by the sweep engine and the summariser.

`store` resolves a spec to its tracking URI, artifact folder and experiment name: both
sides must agree on them, or the summariser would read a different store than the one
the sweep wrote. MLflow itself is imported only inside the functions that talk to it.

The sweep engine's side (`sweeper run`):
  server.py     open the store; an unreachable tracking server fails fast (exit 2)
  runs.py       trial runs keyed by trial key; what a run or a --resume does per key
  sweep_run.py  the parent run: spec, provenance, cluster
  recorder.py   the driver, sole writer of trial statuses/metrics/errors (deduplicated)
  callback.py   the Tune callback feeding the recorder and the progress view
  artifacts.py  the trial's own upload of its checkpoint and files
  staging.py    inputs through the artifact store, a node cache keyed by content hash
  resume_sync.py  a trial's last checkpoint synced to its run, restored on another node
"""

from __future__ import annotations

from sweeper.tracking.store import artifact_root, ensure_experiment, experiment_name, spec_store_uri

__all__ = ["artifact_root", "ensure_experiment", "experiment_name", "spec_store_uri"]
