"""Opening a sweep's tracking store, failing fast when a tracking server is unreachable.

DESIGN invariant 5: an unreachable tracking server is reported before any trial
starts, with exit code 2. MLflow's own client would retry a dead server for minutes
(and only when the first run is logged), so the driver asks the server's `/health`
endpoint once, with a short timeout, before doing anything else.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from sweeper.spec import SweepSpec
from sweeper.tracking.store import artifact_root, ensure_experiment, experiment_name

if TYPE_CHECKING:
    from mlflow import MlflowClient

HEALTH_TIMEOUT_S = 5.0
SERVER_SCHEMES = frozenset({"http", "https", "databricks"})


class TrackingUnreachable(Exception):
    """The tracking server did not answer; the message names its URI."""


def is_server(uri: str) -> bool:
    """A tracking server chooses its own artifact location; a local store does not."""
    return urlparse(uri).scheme.lower() in SERVER_SCHEMES


def check_server(uri: str, timeout: float = HEALTH_TIMEOUT_S) -> None:
    """Raise TrackingUnreachable unless the http(s) server at `uri` answers `/health`.

    Any HTTP answer below 500 counts as reachable (a proxy may hide `/health`, and an
    authentication error is better reported by MLflow itself); no answer, or a 5xx,
    does not. Other schemes (sqlite, file, databases) are not servers: nothing to do.
    """
    scheme = urlparse(uri).scheme.lower()
    if scheme not in {"http", "https"}:
        return
    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return
    except urllib.error.HTTPError as exc:
        if exc.code < 500:
            return
        reason = f"HTTP {exc.code} from {url}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = str(getattr(exc, "reason", exc))
    raise TrackingUnreachable(f"cannot reach the MLflow tracking server at {uri}: {reason}")


def open_store(spec: SweepSpec, uri: str) -> tuple[MlflowClient, str]:
    """An MlflowClient on `uri` and the sweep's experiment id (created if absent, with
    its artifacts in `output_dir/mlartifacts` unless a server decides)."""
    import logging

    from mlflow import MlflowClient

    for noisy in ("alembic", "mlflow.store.db.utils"):  # schema migration chatter
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if not is_server(uri):
        Path(spec.output_dir).mkdir(parents=True, exist_ok=True)
    client = MlflowClient(uri)
    root = None if is_server(uri) else artifact_root(spec)
    return client, ensure_experiment(client, experiment_name(spec), root)
