"""Trial-side artifact upload: the best checkpoint, the config, the log, the events.

The trial uploads its own files because only its node has them (on a cluster the
driver cannot read a worker's disk). It writes through the run's artifact repository
(`artifact_uri` handed over by the driver), not through the tracking store, so a
trial never opens the driver's SQLite database; the same call writes to a local
folder, S3, or a tracking server's `mlflow-artifacts:` proxy. A failed upload raises,
which fails the trial: a finished run without its checkpoint would be a false record.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sweeper import layout

if TYPE_CHECKING:
    from mlflow.store.artifact.artifact_repo import ArtifactRepository

    from sweeper.trainers.runner import TrialResult

LOG_FILES = (
    (layout.TRIAL_CONFIG_FILE, layout.ARTIFACT_TRIAL_CONFIG),
    (layout.TRAINER_LOG_FILE, layout.ARTIFACT_TRAINER_LOG),
    (layout.EVENTS_FILE, layout.ARTIFACT_EVENTS),
)
"""(local file in the trial folder, artifact name): the names are the same today, and
`upload_logs` relies on that (a test holds it)."""


def repository(artifact_uri: str, tracking_uri: str) -> ArtifactRepository:
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    return get_artifact_repository(artifact_uri, tracking_uri=tracking_uri)


def upload_logs(out_dir: Path, artifact_uri: str, tracking_uri: str) -> list[str]:
    """trial.json, trainer.log and events.jsonl (those that exist) at the artifact root;
    returns their artifact names."""
    repo = repository(artifact_uri, tracking_uri)
    uploaded = []
    for local, name in LOG_FILES:
        path = Path(out_dir) / local
        if path.is_file():
            repo.log_artifact(str(path))  # root-level, under its own name
            uploaded.append(name)
    return uploaded


def upload_trial(result: TrialResult, artifact_uri: str, tracking_uri: str) -> list[str]:
    """Everything a finished trial leaves in MLflow; raises if the best checkpoint is
    missing or any upload fails."""
    best = result.checkpoints.best
    if best is None or not Path(best).exists():
        raise FileNotFoundError(f"the trainer left no best checkpoint in {result.out_dir}")
    repo = repository(artifact_uri, tracking_uri)
    if Path(best).is_dir():
        repo.log_artifacts(str(best), layout.ARTIFACT_BEST_CHECKPOINT)
    else:
        repo.log_artifact(str(best), layout.ARTIFACT_BEST_CHECKPOINT)
    return [
        layout.ARTIFACT_BEST_CHECKPOINT,
        *upload_logs(result.out_dir, artifact_uri, tracking_uri),
    ]
