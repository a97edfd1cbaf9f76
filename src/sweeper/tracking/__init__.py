"""A sweep's MLflow record, shared by the sweep engine and the summariser.

`store.py` resolves a spec to its store, artifact folder and experiment name: both
sides must agree on them, or the summariser would read a different store than the one
the sweep wrote. MLflow itself is imported only inside the functions that talk to it.

  store.py        the spec's own store URI, artifact folder, experiment name
  empty_store.py  a new SQLite store starts as a copy of an empty, migrated one
  server.py       open the store; an unreachable tracking server fails fast (exit 2)
  drivers.py      a database URI's driver (SQLAlchemy's choice) is installed, or one line
                  naming the install command
  lease.py        one live driver per sweep: a lease in the store, renewed by a heartbeat
  runs.py         trial runs keyed by trial key; what a run or a --resume does per key
  sweep_run.py    the parent run: spec, provenance, cluster
  record_format.py the record's format version on the parent run, one upgrade step per
                  older version (in memory), a newer record refused
  recorder.py     the driver, sole writer of trial statuses/metrics/errors (deduplicated)
  outbox.py       the driver's writes, kept in order and retried while the store is away
  store_errors.py what a failed write means: retry or not, why in words, MLflow's retries off
  cost_ledger.py  what each trial held and used, per attempt and in total (lost work too)
  inputs.py       what a sweep's trials compute from, and the check on --resume
  lineage.py      which prepared data a run trained and was measured on
  artifacts.py    the trial's own upload of its checkpoint and files
  models.py       each finished trial's best checkpoint as an MLflow logged model
  staging.py      inputs through the artifact store, a node cache keyed by content hash
  resume_sync.py  a trial's last checkpoint synced to its run, restored on another node
  study.py        the Optuna studies of a search: storage, names, resume, importances
  links.py        links into the MLflow UI, the same wherever sweeper prints one, and the
                  runs-table view they open
"""

from __future__ import annotations

from sweeper.tracking.store import artifact_root, ensure_experiment, experiment_name, spec_store_uri

__all__ = ["artifact_root", "ensure_experiment", "experiment_name", "spec_store_uri"]
