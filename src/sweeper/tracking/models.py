"""Each finished trial's best checkpoint as an MLflow 3 logged model.

The experiment's Models tab lists logged models; a trial's best checkpoint (already
uploaded to its run under `checkpoints/best`, `tracking.artifacts`) appears there as
one model per trial, made by its run (`source_run_id`) and carrying the best-checkpoint metrics
(`record_names.BEST_METRIC_NAMES`), so models can be sorted by `best_test_accuracy` in the
UI. The model is *external*: MLflow stores no second copy of the checkpoint, its tag
`sweeper.checkpoint` names where it is (`runs:/<run id>/checkpoints/best`), which a
fairseq or HF loader reads after `mlflow artifacts download`. The metrics are logged
once, on the run and the model together (a metric point with a `model_id`), so the
run's history holds each of them once. The model is also an *output* of its run, at the
best step (`MlflowClient.log_outputs`, what `mlflow.<flavor>.log_model` records): the
run page's "Logged models" lists a run's model outputs (and inputs), not the models
that name the run as their source, so without it the run page would show none.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sweeper import record_names

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mlflow import MlflowClient
    from mlflow.entities import Metric, RunInfo, RunTag

TAG_CHECKPOINT = "sweeper.checkpoint"
MODEL_TYPE = "sweeper-best-checkpoint"


MODEL_NAME_FORBIDS = str.maketrans({".": "_", "/": "-", ":": "-", "%": "-", '"': "", "'": ""})
"""MLflow refuses a logged model whose name holds any of these (a trial name such as
`dummy-random-full-lr0.001-s1` holds a dot): each becomes `_`, `-` or nothing."""


def model_name(run_name: str) -> str:
    """The logged model's name for a trial run: its run name, made acceptable to MLflow
    (`MODEL_NAME_FORBIDS`); the run itself keeps its name."""
    return run_name.translate(MODEL_NAME_FORBIDS) or "trial"


def checkpoint_uri(run_id: str) -> str:
    return f"runs:/{run_id}/{record_names.ARTIFACT_BEST_CHECKPOINT}"


def log_best_model(
    client: MlflowClient,
    run_id: str,
    trial_key: str,
    best: Mapping[str, float],
    step: int,
    made: dict[str, str],
    info: RunInfo | None = None,
    also: Sequence[Metric] = (),
    tags: Sequence[RunTag] = (),
) -> str:
    """Create the model (once: `made` maps run id -> model id across retries of this
    write), make it an output of the run at `step` (once), log `best` on the run and
    the model at `step`, mark the model READY. `info`: the run's, where the caller
    has it (else it is read); `also` and `tags`: more of the run's metrics and tags,
    sent in the same request as `best`."""
    from mlflow.entities import LoggedModelOutput, Metric

    model_id = made.get(run_id)
    linked = False
    if model_id is not None:  # a retry: the link may be made already
        outputs = client.get_run(run_id).outputs
        linked = outputs is not None and any(o.model_id == model_id for o in outputs.model_outputs)
    else:
        info = info or client.get_run(run_id).info
        model = client.create_logged_model(
            info.experiment_id,
            name=model_name(info.run_name),
            source_run_id=run_id,
            tags={record_names.TAG_TRIAL_KEY: trial_key, TAG_CHECKPOINT: checkpoint_uri(run_id)},
            model_type=MODEL_TYPE,
        )
        model_id = made[run_id] = model.model_id
    if not linked:
        client.log_outputs(run_id, [LoggedModelOutput(model_id, step)])
    now = int(time.time() * 1000)
    metrics = [Metric(k, float(v), now, step, model_id=model_id) for k, v in best.items()]
    client.log_batch(run_id, metrics=metrics + list(also), tags=list(tags), synchronous=True)
    client.finalize_logged_model(model_id, "READY")
    return model_id
