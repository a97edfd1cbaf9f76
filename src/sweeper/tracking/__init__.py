"""A sweep's MLflow record, shared by the sweep engine and the summariser.

`store` resolves a spec to its tracking URI, artifact folder and experiment name: both
sides must agree on them, or the summariser would read a different store than the one
the sweep wrote. MLflow itself is imported only inside the functions that talk to it.
"""

from __future__ import annotations

from sweeper.tracking.store import artifact_root, ensure_experiment, experiment_name, tracking_uri

__all__ = ["artifact_root", "ensure_experiment", "experiment_name", "tracking_uri"]
