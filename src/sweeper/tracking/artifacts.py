"""Trial-side artifact upload: the best checkpoint, the config, the log, the events,
the per-example predictions.

The trial uploads its own files because only its node has them (on a cluster the
driver cannot read a worker's disk). It writes through the run's artifact repository
(`artifact_uri` handed over by the driver), not through the tracking store, so a
trial never opens the driver's SQLite database; the same call writes to a local
folder, S3, or a tracking server's `mlflow-artifacts:` proxy. A failed upload raises,
which fails the trial: a finished run without its checkpoint would be a false record.
The files of one trial go up together (a thread each): through a tracking server each
is one request, and none waits for another. Predictions files (`predictions/<split>.json`,
`sweeper.trainers.predictions`) go up with them when the trainer wrote them; a trainer
that writes none adds no upload.
"""

from __future__ import annotations

import contextlib
import functools
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper import record_names
from sweeper.redact import links_outside, redact
from sweeper.trainers import predictions
from sweeper.trainers.trial_predictions import SPLITS

if TYPE_CHECKING:
    from mlflow.store.artifact.artifact_repo import ArtifactRepository

    from sweeper.trainers.runner import TrialResult

LOG_FILES = (
    (record_names.TRIAL_CONFIG_FILE, record_names.ARTIFACT_TRIAL_CONFIG),
    (record_names.TRAINER_LOG_FILE, record_names.ARTIFACT_TRAINER_LOG),
    (record_names.EVENTS_FILE, record_names.ARTIFACT_EVENTS),
)
"""(local file in the trial folder, artifact name): the two names of each pair are
equal, and `upload_logs` relies on that (a test holds it)."""


class UploadError(RuntimeError):
    """A finished trial's artifacts did not reach the store: the trial fails with this."""


def repository(artifact_uri: str, tracking_uri: str) -> ArtifactRepository:
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    return get_artifact_repository(artifact_uri, tracking_uri=tracking_uri)


def prediction_files(out_dir: Path) -> dict[str, Path]:
    """{split: file} of the predictions files the trainer left in the trial folder."""
    folder = Path(out_dir) / record_names.PREDICTIONS_DIR
    found = {split: folder / predictions.file_name(split) for split in SPLITS}
    return {s: path for s, path in found.items() if path.is_file() and not path.is_symlink()}


def uploaded_splits(names: list[str]) -> list[str]:
    """The splits among uploaded artifact names whose predictions went up (for the
    `record_names.TAG_PREDICTIONS` tag)."""
    return [s for s in SPLITS if predictions.artifact_path(s) in names]


def upload_logs(
    out_dir: Path,
    artifact_uri: str,
    tracking_uri: str,
    also: Callable[[], object] | None = None,
    with_predictions: bool = False,
) -> list[str]:
    """trial.json, trainer.log and events.jsonl (those that exist) at the artifact root,
    `also` (another upload) and, `with_predictions`, the predictions files, at once;
    returns their artifact names. Raises the first failure once every upload has
    ended."""
    repo = repository(artifact_uri, tracking_uri)
    uploads: list[Callable[[], object]] = [] if also is None else [also]
    uploaded = []
    for local, name in LOG_FILES:
        path = Path(out_dir) / local
        if path.is_file() and not path.is_symlink():  # a link could point anywhere
            uploads.append(functools.partial(_upload_log, repo, path))
            uploaded.append(name)
    for split, path in (prediction_files(out_dir) if with_predictions else {}).items():
        folder = record_names.ARTIFACT_PREDICTIONS_DIR
        uploads.append(functools.partial(repo.log_artifact, str(path), folder))
        uploaded.append(predictions.artifact_path(split))
    with ThreadPoolExecutor(max_workers=max(1, len(uploads))) as pool:
        for done in [pool.submit(upload) for upload in uploads]:
            done.result()
    return uploaded


def _upload_log(repo: ArtifactRepository, path: Path) -> None:
    with redacted_copy(path) as clean:
        repo.log_artifact(str(clean))  # root-level, under its own name


@contextlib.contextmanager
def redacted_copy(path: Path) -> Iterator[Path]:
    """`path` itself, or (when it holds a secret value, e.g. a trainer that printed its
    environment) a same-named copy with the secrets masked, so the artifact never has them."""
    text = path.read_text(encoding="utf-8", errors="replace")
    clean = redact(text)
    if clean == text:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="sweeper-redacted-") as tmp:
        copy = Path(tmp) / path.name
        copy.write_text(clean, encoding="utf-8")
        yield copy


def upload_trial(result: TrialResult, artifact_uri: str, tracking_uri: str) -> list[str]:
    """Everything a finished trial leaves in MLflow (its predictions files among them,
    where it has them: `uploaded_splits` of the names returned); raises if the best
    checkpoint is missing or any upload fails."""
    best = result.checkpoints.best
    if best is None or not Path(best).exists():
        raise FileNotFoundError(f"the trainer left no best checkpoint in {result.out_dir}")
    escaping = links_outside(result.out_dir)
    if escaping:  # an upload would copy what they point at into the shared record
        raise UploadError(
            f"refusing to upload {result.out_dir}: symbolic link(s) leading out of the "
            f"trial folder: {', '.join(str(p) for p in escaping[:3])}"
        )

    def upload_best() -> None:
        repo = repository(artifact_uri, tracking_uri)
        if Path(best).is_dir():
            repo.log_artifacts(str(best), record_names.ARTIFACT_BEST_CHECKPOINT)
        else:
            repo.log_artifact(str(best), record_names.ARTIFACT_BEST_CHECKPOINT)

    try:
        logs = upload_logs(
            result.out_dir, artifact_uri, tracking_uri, also=upload_best, with_predictions=True
        )
    except Exception as exc:
        raise UploadError(
            f"artifact upload to {artifact_uri} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return [record_names.ARTIFACT_BEST_CHECKPOINT, *logs]
