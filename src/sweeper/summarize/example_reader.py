"""The counted trials' per-example predictions, read from their runs' artifacts.

The test-set statistics (what the test set can resolve, its share of the variance)
need which examples each trial got right, not only how many: each trial uploads
`predictions/<split>.json` (`sweeper.trainers.predictions`) and its run's
`sweeper.predictions` tag names the splits it holds. Only tagged runs are read, so a
store without predictions (older records, the test-only dummy trainer) costs nothing
here and imports no MLflow; tagged ones are downloaded a few at a time, since through a
tracking server each file is one HTTP request.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

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
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a bar per file
    if client is None:
        from sweeper.summarize.mlflow_reader import open_client

        client = open_client(uri)
    found: dict[str, SplitPredictions] = {}
    with tempfile.TemporaryDirectory(prefix="sweeper-predictions-") as tmp:

        def fetch(trial: CountedTrial) -> tuple[str, SplitPredictions | None]:
            return trial.run_id, _download(client, trial.run_id, split, Path(tmp) / trial.run_id)

        with ThreadPoolExecutor(max_workers=min(WORKERS, len(wanted))) as pool:
            for run_id, read in pool.map(fetch, wanted):
                if read is not None:
                    found[run_id] = read
    return found


def _download(client: MlflowClient, run_id: str, split: str, into: Path) -> SplitPredictions | None:
    from mlflow.exceptions import MlflowException

    into.mkdir(parents=True, exist_ok=True)
    try:
        path = client.download_artifacts(run_id, files.artifact_path(split), str(into))
        return files.read(Path(path))
    except (MlflowException, OSError, ValueError, KeyError):
        return None
