"""Resolving a spec to its MLflow store: tracking URI, artifact folder, experiment.

docs/architecture.md, invariant 6: with no `tracking.uri` a sweep writes to a SQLite store and an
artifact folder inside its `output_dir`, so a sweep folder is self-contained and can be
moved or archived as one piece. A tracking server (`tracking.uri: http://...`) chooses
its own artifact location, so `artifact_root` only matters for stores this machine owns.

`sqlite_path` is the one reading of a `sqlite:` URI: the summariser's fast metric path,
the reachability check, the UI and the Optuna study storage all need the database file,
and four hand-rolled parsers had disagreed on query strings and %-escapes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from sweeper import record_names
from sweeper.selection import ACCURACY, Selection
from sweeper.spec.schema import SweepSpec

if TYPE_CHECKING:
    from mlflow import MlflowClient

DB_FILE = "mlflow.db"
ARTIFACT_DIR = "mlartifacts"


def spec_store_uri(spec: SweepSpec) -> str:
    """The store the spec alone names: `tracking.uri`, else `sqlite:///{output_dir}/mlflow.db`.
    Where a sweep's record goes is `sweeper.deploy.resolve.tracking_uri` (the one
    precedence: flag, spec, $MLFLOW_TRACKING_URI, a running cluster, this default)."""
    if spec.tracking.uri:
        return spec.tracking.uri
    return f"sqlite:///{Path(spec.output_dir) / DB_FILE}"


def sqlite_path(uri: str) -> Path | None:
    """The database file of a `sqlite:` URI; None for any other store, and for an
    in-memory or file-less SQLite URI (nothing on disk to check or read).

    SQLAlchemy's form, which MLflow opens: `sqlite:///rel/path` is relative to the
    working directory, `sqlite:////abs/path` absolute; the URL path minus its first
    slash is the file either way. A query string (`?mode=ro`) is not part of the file
    name, and %-escapes are decoded as SQLAlchemy decodes them.
    """
    parsed = urlparse(uri)
    if parsed.scheme.lower() != "sqlite" or len(parsed.path) < 2:
        return None
    path = unquote(parsed.path[1:])
    return None if path == ":memory:" else Path(path)


def artifact_root(spec: SweepSpec) -> Path:
    """Folder for run artifacts of a local store: `output_dir/mlartifacts`."""
    return Path(spec.output_dir) / ARTIFACT_DIR


def experiment_name(spec: SweepSpec) -> str:
    """The MLflow experiment of a sweep: `tracking.experiment`, else the sweep name."""
    return spec.tracking.experiment or spec.name


def view_metrics(selection: Selection = ACCURACY) -> tuple[str, ...]:
    """The best-checkpoint columns of the runs table sweeper's links open
    (`tracking.links.view_state`): each reported test metric (the first is Table 2's),
    the selection metric, the step; e.g. `best_test_accuracy`, `best_valid_accuracy`,
    `best_step`."""
    prefix = record_names.METRIC_BEST_PREFIX
    reported = (prefix + name for name in selection.report)
    return (*reported, prefix + selection.metric, record_names.METRIC_BEST_STEP)


DEFAULT_VIEW_METRICS = view_metrics()
"""A classification sweep's: `best_test_accuracy`, `best_valid_accuracy`, `best_step`."""


def spec_view_metrics(spec: SweepSpec) -> tuple[str, ...]:
    """`view_metrics` of the spec's `select:` block."""
    return view_metrics(Selection.of(spec.select))


def ensure_experiment(
    client: MlflowClient,
    name: str,
    artifact_root: Path | str | None = None,
    metrics: Sequence[str] = DEFAULT_VIEW_METRICS,
) -> str:
    """Return the id of experiment `name`, creating it (with `artifact_root`) if absent.

    `artifact_root` is used only on creation: an existing experiment keeps its location,
    so re-running a sweep from a moved folder still finds its earlier artifacts. Pass
    None for a tracking server, which knows where its artifacts go. A deleted
    experiment is an error rather than silently restored: its name is still taken in
    MLflow, and bringing it back is the user's decision (`mlflow experiments restore`).
    Two processes creating the same experiment at once both get its id.

    The experiment carries, new or old, the tags the UI reads for sweeper's links
    (`tracking.links`): the model-training kind, and the shared view with `metrics` as
    columns (written only when it differs, so an unchanged sweep rewrites nothing).
    """
    from mlflow.exceptions import MlflowException

    from sweeper.tracking.links import (
        EXPERIMENT_KIND_TAG,
        MODEL_TRAINING_KIND,
        VIEW_TAG,
        first_view,
        needs_view,
    )

    view = first_view(metrics, int(time.time() * 1000))
    existing = client.get_experiment_by_name(name)
    if existing is None:
        location = None
        if artifact_root is not None:
            text = str(artifact_root)
            location = text if "://" in text else Path(text).resolve().as_uri()
        try:
            # MLflow 3's model-training view, opened on sweeper's shared view
            tags = {EXPERIMENT_KIND_TAG: MODEL_TRAINING_KIND, VIEW_TAG: view}
            return client.create_experiment(name, artifact_location=location, tags=tags)
        except MlflowException:
            existing = client.get_experiment_by_name(name)  # created concurrently
            if existing is None:
                raise
    if existing.lifecycle_stage == "deleted":
        raise ValueError(
            f"MLflow experiment {name!r} (id {existing.experiment_id}) is deleted; restore it "
            f"(`mlflow experiments restore --experiment-id {existing.experiment_id}`) or "
            "set tracking.experiment to another name"
        )
    if EXPERIMENT_KIND_TAG not in existing.tags:  # created outside sweeper: mark it too
        client.set_experiment_tag(existing.experiment_id, EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND)
    if needs_view(existing.tags.get(VIEW_TAG), metrics):
        client.set_experiment_tag(existing.experiment_id, VIEW_TAG, view)
    return existing.experiment_id
