"""The counted trials' per-example predictions, read from their runs' artifacts.

The test-set statistics (what the test set can resolve, its share of the variance)
need which examples each trial got right, not only how many: each trial uploads
`predictions/<split>.json` (`sweeper.trainers.predictions`) and its run's
`sweeper.predictions` tag names the splits it holds. Only tagged runs are read, so a
store without predictions (older records, the test-only dummy trainer) costs nothing
here and imports no MLflow; tagged ones are downloaded a few at a time, since through a
tracking server each file is one HTTP request. A local SQLite store's files are read
straight from its artifact folder.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from sweeper.summarize.records import CountedTrial
from sweeper.trainers import predictions as files
from sweeper.trainers.predictions import SplitPredictions

if TYPE_CHECKING:
    from mlflow import MlflowClient

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
    found = _local_files(uri, wanted, split) if client is None else {}
    wanted = [t for t in wanted if t.run_id not in found]
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


def _local_files(
    uri: str, trials: Sequence[CountedTrial], split: str
) -> dict[str, SplitPredictions]:
    """The files of a SQLite store's runs whose artifacts are a local folder, read where
    they lie (no MLflow import); runs whose files are elsewhere are left to MLflow."""
    from sweeper.summarize.sqlite_store import open_sqlite

    store = open_sqlite(uri)
    if store is None:
        return {}
    found = {}
    for run_id, root in store.artifact_uris([t.run_id for t in trials]).items():
        parsed = urlparse(root)
        if parsed.scheme not in ("", "file"):
            continue
        path = Path(unquote(parsed.path)) / files.artifact_path(split)
        try:
            found[run_id] = files.read(path)
        except (OSError, ValueError, KeyError):
            continue  # unreadable: left out, as `_download` leaves it out
    return found


def _download(client: MlflowClient, run_id: str, split: str, into: Path) -> SplitPredictions | None:
    from mlflow.exceptions import MlflowException

    into.mkdir(parents=True, exist_ok=True)
    try:
        path = client.download_artifacts(run_id, files.artifact_path(split), str(into))
        return files.read(Path(path))
    except (MlflowException, OSError, ValueError, KeyError):
        return None
