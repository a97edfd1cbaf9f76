"""Opening a sweep's tracking store, and the one check that the store can be reached.

docs/architecture.md, invariant 5: an unreachable tracking server is reported before
any trial starts, with exit code 2. MLflow's own client would retry a dead server for
minutes (and only when the first run is logged), so the driver asks the server's
`/health` endpoint once, with a short timeout, before doing anything else, then one
read its database must answer (a server whose database is down is up all the same).

`check_server` is that check for every command: `sweeper run` calls it before opening
the store (a local store that does not exist yet is created), `sweeper summarize` and
`sweeper ui` call it with `must_exist=True` (there, a missing local store means the
sweep has not run, and opening it would create an empty one). A database URI
(`postgresql://...` given to sweeper itself) must have its driver installed
(`sweeper.tracking.drivers`: DriverMissing, whose message names the install command).
Each caller words the failure for its own users; the exceptions carry what they need.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from sweeper.spec.schema import SweepSpec
from sweeper.tracking.drivers import check_driver
from sweeper.tracking.store import (
    artifact_root,
    ensure_experiment,
    experiment_name,
    spec_view_metrics,
    sqlite_path,
)

if TYPE_CHECKING:
    from mlflow import MlflowClient

HEALTH_TIMEOUT_S = 5.0
STORE_PROBE = "/api/2.0/mlflow/experiments/search?max_results=1"
"""A read the server answers from its backend store: the smallest experiment search."""
STORE_DOWN = (
    "the server answers, its backend store does not ({}): is its database (e.g. "
    "PostgreSQL) running and reachable from the server?"
)
SERVER_SCHEMES = frozenset({"http", "https", "databricks"})


class TrackingUnreachable(Exception):
    """The tracking server did not answer; the message names its URI."""

    def __init__(self, uri: str, reason: str):
        super().__init__(f"cannot reach the MLflow tracking server at {uri}: {reason}")
        self.uri = uri
        self.reason = reason


class StoreMissing(Exception):
    """A local store (SQLite file, file-store folder) that does not exist."""

    def __init__(self, uri: str, path: Path, hint: str = ""):
        super().__init__(f"no MLflow store at {path} (tracking URI {uri}){hint}")
        self.uri = uri
        self.path = path


def is_server(uri: str) -> bool:
    """A tracking server chooses its own artifact location; a local store does not."""
    return urlparse(uri).scheme.lower() in SERVER_SCHEMES


def check_server(
    uri: str,
    timeout: float = HEALTH_TIMEOUT_S,
    *,
    must_exist: bool = False,
    store: bool = True,
) -> None:
    """Raise TrackingUnreachable unless the http(s) server at `uri` answers `/health`
    and (with `store`) a request its backend store must answer (`STORE_PROBE`: MLflow's
    `/health` says 200 while the server's database is down, and its other endpoints
    then answer 503); DriverMissing (`sweeper.tracking.drivers`) for a database URI
    whose driver is not installed; with `must_exist`, also StoreMissing for a local
    store that is not there.

    Any HTTP answer below 500 counts as reachable (a proxy may hide `/health`, and an
    authentication error is better reported by MLflow itself); no answer, or a 5xx,
    does not. A database URI given to sweeper itself is left to MLflow (its connection
    error names the host).
    """
    scheme = urlparse(uri).scheme.lower()
    if scheme in {"http", "https"}:
        _ask(uri, "/health", timeout)
        if store:
            _ask(uri, STORE_PROBE, timeout, STORE_DOWN)
        return
    check_driver(uri)
    if must_exist:
        _check_local(uri, scheme)


def _ask(uri: str, path: str, timeout: float, on_5xx: str = "{}") -> None:
    """TrackingUnreachable unless `uri` + `path` answers below HTTP 500; a 5xx answer's
    reason is `on_5xx` with `HTTP <code> from <url>` in its braces."""
    url = uri.rstrip("/") + path
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return
    except urllib.error.HTTPError as exc:
        if exc.code < 500:
            return
        reason = on_5xx.format(f"HTTP {exc.code} from {url}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = str(getattr(exc, "reason", exc))
    raise TrackingUnreachable(uri, reason)


def _check_local(uri: str, scheme: str) -> None:
    """A SQLite file must be a file; a file store (a bare path or `file:`) must exist."""
    if scheme == "sqlite":
        db = sqlite_path(uri)
        if db is not None and not db.is_file():
            raise StoreMissing(uri, db, "; has the sweep run yet?")
    elif scheme in {"", "file"}:
        folder = Path(urlparse(uri).path if scheme == "file" else uri)
        if not folder.exists():
            raise StoreMissing(uri, folder)


def open_store(spec: SweepSpec, uri: str) -> tuple[MlflowClient, str]:
    """An MlflowClient on `uri` and the sweep's experiment id (created if absent, with
    its artifacts in `output_dir/mlartifacts` unless a server decides)."""
    import logging

    for noisy in ("alembic", "mlflow.store.db.utils"):  # schema migration chatter
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if not is_server(uri):
        Path(spec.output_dir).mkdir(parents=True, exist_ok=True)
    root = None if is_server(uri) else artifact_root(spec)
    db = sqlite_path(uri)
    with creation_lock(db):  # the first access creates and migrates the schema
        client = _open_client(uri, db)
        experiment = ensure_experiment(client, experiment_name(spec), root, spec_view_metrics(spec))
        return client, experiment


def _open_client(uri: str, db: Path | None) -> MlflowClient:
    """MlflowClient on `uri`; a new SQLite file starts from the cached empty schema, or
    leaves one behind for the next (`sweeper.tracking.empty_store`)."""
    from mlflow import MlflowClient
    from mlflow.version import VERSION

    from sweeper.tracking.empty_store import keep_template, seed_from_template

    if db is None or db.exists() or seed_from_template(db, VERSION):
        return MlflowClient(uri)
    client = MlflowClient(uri)
    client.search_experiments(max_results=1)  # the store is made (and migrated) on first use
    keep_template(db, VERSION)
    return client


@contextmanager
def creation_lock(db: Path | None) -> Iterator[None]:
    """Serialise the first use of a SQLite store between processes on this machine.

    MLflow creates and migrates a new SQLite file's schema on first access; two drivers
    doing it at once can make the second fail inside alembic ("Online migration expected
    to match one row"). An exclusive `flock` on `<db>.lock` makes the second wait for
    the first, then find the schema made. None (a server, whose database is
    migrated when the server starts): no lock.
    """
    if db is None:
        yield
        return
    import fcntl

    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
