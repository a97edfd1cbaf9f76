"""The counted trials' predictions read through a real `mlflow server`, without MLflow.

A summary through a tracking server reads each tagged trial's `predictions/test.json`
over the server's REST API (`HttpStore.artifact`), as it reads the runs, so it imports
no MLflow; a tagged run whose file is missing is left out of the test-set statistics
and does not fail the summary.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sweeper import record_names
from sweeper.trainers import predictions
from sweeper.trainers.predictions import CheckpointPredictions, SplitPredictions
from tests.support.cluster import mlflow_server

pytestmark = pytest.mark.integration


def test_predictions_come_through_the_server_without_importing_mlflow(tmp_path: Path):
    from mlflow import MlflowClient

    with mlflow_server(tmp_path / "server") as server:
        client = MlflowClient(server.uri)
        experiment = client.create_experiment("served")
        held, missing = (client.create_run(experiment).info.run_id for _ in range(2))
        best = CheckpointPredictions(7, (1, 0, 1), (0.9, 0.6, 0.7), (1, 0, 0))
        split = SplitPredictions("test", "classification", (0, 1, 2), {"best": best})
        path = predictions.write(tmp_path / "trial", split)
        client.log_artifact(held, str(path), record_names.ARTIFACT_PREDICTIONS_DIR)
        code = (
            "import sys\n"
            "from tests.unit.test_summarize_example_reader import _trial\n"
            "from sweeper.summarize.example_reader import read_predictions\n"
            "tag = {'sweeper.predictions': 'valid,test'}\n"
            f"trials = [_trial({held!r}, tag), _trial({missing!r}, tag)]\n"
            f"found = read_predictions({server.uri!r}, trials)\n"
            f"print(sorted(found) == [{held!r}], found[{held!r}].at('best').correct,\n"
            "      'mlflow' in sys.modules)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "(1,", "0,", "0)", "False"]
