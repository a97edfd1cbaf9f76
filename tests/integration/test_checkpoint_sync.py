"""A trial resumes from the checkpoint it synced to a real tracking server, although
its folder is gone: what a retry on a node that never ran it finds (invariant 7).

One dummy trial against a real `mlflow server` with served artifacts, `retries: 0`:
the first `sweeper run` crashes it at step 15, after its step-10 validation point was
synced to the run's artifacts (`resume/`). The test then deletes every trial folder,
so nothing local is left to resume from, and `sweeper run --resume` finishes it: the
trainer starts at step 10, not 0, and MLflow holds every metric step exactly once.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sweeper import record_names
from sweeper.tracking.resume_sync import RESUME_DIR
from tests.support.cluster import mlflow_server
from tests.support.sweeps import new_sweep, run_sweeper

pytestmark = pytest.mark.integration


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_a_retry_without_its_folder_resumes_from_the_synced_checkpoint(tmp_path, tmp_path_factory):
    from mlflow import MlflowClient

    spec, out = new_sweep(
        tmp_path, tmp_path_factory, "synced", grid={"seed": [1]}, retries=0, sync_interval_s=0
    )  # a trial of seconds: copied at every validation point all the same
    marker = tmp_path / "crashed-once"
    extra = {"*": {"fail_at_step": 15, "fail_once_marker": str(marker)}}
    with mlflow_server(tmp_path / "server") as server:
        first = run_sweeper("run", spec, "--tracking-uri", server.uri, extra=extra)
        assert first.returncode == 1, first.stderr[-3000:]
        assert marker.exists()
        assert "inputs for every node:" in first.stdout  # published: the store is remote
        assert "View run" not in first.stdout + first.stderr  # MLflow's own links: off

        client = MlflowClient(server.uri)
        experiment = client.get_experiment_by_name("synced")
        (run,) = [
            r
            for r in client.search_runs([experiment.experiment_id])
            if r.data.tags.get(record_names.TAG_ROLE) == record_names.ROLE_TRIAL
        ]
        run_id = run.info.run_id
        synced = [a.path for a in client.list_artifacts(run_id, RESUME_DIR)]
        assert f"{RESUME_DIR}/manifest-0000000010.json" in synced, synced

        shutil.rmtree(out / "trials")  # the next attempt's node has no folder
        second = run_sweeper("run", spec, "--tracking-uri", server.uri, "--resume", extra=extra)
        assert second.returncode == 0, second.stderr[-3000:]

        log = client.download_artifacts(run_id, record_names.ARTIFACT_TRAINER_LOG, str(tmp_path))
        text = Path(log).read_text(encoding="utf-8")
        assert "sweeper: restored the checkpoint synced at step 10" in text
        assert "dummy trainer: starting at step 10 of 20" in text
        assert "starting at step 0" not in text

        run = client.get_run(run_id)
        assert run.info.status == "FINISHED"
        train = [m.step for m in client.get_metric_history(run_id, record_names.METRIC_TRAIN_LOSS)]
        assert sorted(train) == list(range(1, 21))  # 0 lost, 0 duplicated
        valid = [m.step for m in client.get_metric_history(run_id, record_names.METRIC_VALID_ACC)]
        assert sorted(valid) == [10, 20]
        listed = {a.path for a in client.list_artifacts(run_id)}
        assert record_names.ARTIFACT_BEST_CHECKPOINT.split("/")[0] in listed
        # a finished trial's resume copies are deleted
        assert not client.list_artifacts(run_id, RESUME_DIR)
        stored = tmp_path / "server" / "artifacts" / experiment.experiment_id / "inputs"
        assert len([p for p in stored.iterdir() if p.is_dir()]) == 2  # fairseq + hf data


def test_an_early_stopped_trial_leaves_no_resume_copies_on_the_server(tmp_path):
    """ASHA stops a trial by killing it mid-run, so the trial cannot delete its own
    resume copies as a finished one does: the driver's early-stop handling must."""
    import io
    from types import SimpleNamespace

    from mlflow import MlflowClient

    from sweeper.search.searcher import SearchCallback
    from sweeper.tracking.recorder import MetricLog, Recorder
    from sweeper.tune.progress import Progress, TrialView
    from sweeper.tune.trainable import CONFIG_KEY

    with mlflow_server(tmp_path / "server") as server:
        client = MlflowClient(server.uri)
        run_id = client.create_run(client.create_experiment("early")).info.run_id
        for name in ("manifest-0000000010.json", "blobs/0123abcd"):
            client.log_text(run_id, "synced", f"{RESUME_DIR}/{name}")
        client.log_text(run_id, "kept", record_names.ARTIFACT_TRAINER_LOG)
        assert client.list_artifacts(run_id, RESUME_DIR)

        recorder = Recorder(client, {"k": run_id}, MetricLog())
        views = {"k": TrialView(name="k", total=20)}
        callback = SearchCallback(recorder, Progress(views, stream=io.StringIO(), live=False))
        trial = SimpleNamespace(config={CONFIG_KEY: "k"}, last_result={"step": 10})
        callback.on_trial_complete(1, [], trial)
        recorder.drain()

        assert (
            client.get_run(run_id).data.tags[record_names.TAG_STATUS]
            == record_names.Status.EARLY_STOPPED
        )
        assert not client.list_artifacts(run_id, RESUME_DIR)
        kept = [a.path for a in client.list_artifacts(run_id)]
        assert record_names.ARTIFACT_TRAINER_LOG.split("/")[0] in kept  # only resume/ goes
