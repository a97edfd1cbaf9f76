"""Links into the MLflow UI, the same wherever sweeper prints one.

MLflow 3's UI opens an experiment in one of two workflows. Its GenAI view ("Overview":
traces, latency, token usage) is the default for a plain `#/experiments/ID` link, and
a sweep's runs are one click away from it; `?workflowType=machine_learning` on the runs
route opens the runs table of the model-training view directly, and on a run's page
keeps that view. Found in MLflow 3.17's UI bundle: the view comes from that query
parameter while the UI's workflow selector is on (it is in 3.17: a run page linked
without it opens in the GenAI view, checked in tests/integration/test_browser_ui.py),
else from the experiment tag `mlflow.experimentKind`, whose value
`custom_model_development` marks model training (`genai_development` is the other
kind). sweeper does both: every link carries the parameter, and the experiments it
creates carry the tag (`tracking.store.ensure_experiment`).
"""

from __future__ import annotations

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING_KIND = "custom_model_development"
MODEL_TRAINING_VIEW = "workflowType=machine_learning"


def experiment_url(base: str, experiment_id: str | None) -> str:
    """The runs table of one experiment, in the model-training view (the UI's routes
    are in the hash fragment); the UI's home without an experiment id."""
    base = base.rstrip("/")
    if not experiment_id:
        return base
    return f"{base}/#/experiments/{experiment_id}/runs?{MODEL_TRAINING_VIEW}"


def run_url(base: str, experiment_id: str, run_id: str) -> str:
    """One run's page, in the model-training view."""
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}?{MODEL_TRAINING_VIEW}"
