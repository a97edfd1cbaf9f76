"""The counted trials' per-example predictions, read from their runs' artifacts.

The test-set statistics (what the test set can resolve, its share of the variance)
need which examples each trial got right, not only how many: each trial uploads
`predictions/<split>.json` (`sweeper.trainers.predictions`) and its run's
`sweeper.predictions` tag names the splits it holds. Only tagged runs are read, so a
store without predictions (older records, the test-only dummy trainer) costs nothing
here and imports no MLflow; tagged ones are downloaded a few at a time, since through a
tracking server each file is one HTTP request. A local SQLite store's files are read
straight from its artifact folder and a tracking server's over its REST API, neither
importing MLflow (MLflow's client reads any other store).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from sweeper.summarize.records import CountedTrial
from sweeper.trainers import predictions as files
from sweeper.trainers.predictions import BEST, LAST, CheckpointPredictions, SplitPredictions

if TYPE_CHECKING:
    from mlflow import MlflowClient

FLAG_METRICS = frozenset({"accuracy", "exact_match"})
"""Metrics whose value is 100 x mean(`correct`) over the test examples: the only ones
the test-set statistics can be computed for from the predictions files."""
WORKERS = 8
"""Downloads at once: enough to hide a server's latency, few enough for its pool."""


def read_predictions(
    uri: str,
    trials: Sequence[CountedTrial],
    split: str = "test",
    client: MlflowClient | None = None,
) -> dict[str, SplitPredictions]:
    """{run id: its `split` predictions} of every trial in `trials` whose run holds
    them; a file that cannot be read (deleted, unreadable, of a newer format) leaves its
    trial out, as a trial without predictions is left out, and never fails the summary."""
    wanted = [t for t in trials if split in t.predictions]
    if not wanted:
        return {}
    found, tried = _without_mlflow(uri, wanted, split) if client is None else ({}, set())
    wanted = [t for t in wanted if t.run_id not in tried]
    if not wanted:
        return found
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a bar per file
    if client is None:
        from sweeper.summarize.mlflow_reader import open_client

        client = open_client(uri)
    with tempfile.TemporaryDirectory(prefix="sweeper-predictions-") as tmp:

        def fetch(trial: CountedTrial) -> tuple[str, SplitPredictions | None]:
            return trial.run_id, _download(client, trial.run_id, split, Path(tmp) / trial.run_id)

        with ThreadPoolExecutor(max_workers=min(WORKERS, len(wanted))) as pool:
            for run_id, read in pool.map(fetch, wanted):
                if read is not None:
                    found[run_id] = read
    return found


def _without_mlflow(
    uri: str, trials: Sequence[CountedTrial], split: str
) -> tuple[dict[str, SplitPredictions], set[str]]:
    """(the files read without importing MLflow, the runs tried): a SQLite store's runs
    whose artifacts are a local folder, where they lie; a tracking server's through its
    REST reader (`HttpStore.artifact`). A run tried and not found is not tried again;
    runs whose files are elsewhere (S3, a server with credentials) are left to MLflow."""
    from sweeper.summarize.http_store import HttpReadFailed, open_http
    from sweeper.summarize.sqlite_store import open_sqlite

    found: dict[str, SplitPredictions] = {}
    tried: set[str] = set()
    store = open_sqlite(uri)
    if store is not None:
        for run_id, root in store.artifact_uris([t.run_id for t in trials]).items():
            parsed = urlparse(root)
            if parsed.scheme in ("", "file"):
                tried.add(run_id)
                path = Path(unquote(parsed.path)) / files.artifact_path(split)
                with contextlib.suppress(OSError, ValueError, KeyError):
                    found[run_id] = files.read(path)  # unreadable: left out, as below
        return found, tried
    server = open_http(uri)
    if server is None:
        return found, tried

    def fetch(trial: CountedTrial) -> tuple[str, bytes | None]:
        try:
            return trial.run_id, server.artifact(trial.run_id, files.artifact_path(split))
        except HttpReadFailed:
            return trial.run_id, None

    with ThreadPoolExecutor(max_workers=min(WORKERS, len(trials))) as pool:
        for run_id, body in pool.map(fetch, trials):
            tried.add(run_id)
            if body is not None:
                with contextlib.suppress(ValueError, KeyError):
                    found[run_id] = SplitPredictions.from_json(body.decode())
    return found, tried


def _download(client: MlflowClient, run_id: str, split: str, into: Path) -> SplitPredictions | None:
    from mlflow.exceptions import MlflowException

    into.mkdir(parents=True, exist_ok=True)
    try:
        path = client.download_artifacts(run_id, files.artifact_path(split), str(into))
        return files.read(Path(path))
    except (MlflowException, OSError, ValueError, KeyError):
        return None


def counted_checkpoint(
    trial: CountedTrial, split: SplitPredictions
) -> CheckpointPredictions | None:
    """The stored checkpoint (best, else last) at the step the summary counts `trial`
    at; None when neither is at that step."""
    for which in (BEST, LAST):
        found = split.checkpoints.get(which)
        if found is not None and found.step == trial.best_step:
            return found
    return None
