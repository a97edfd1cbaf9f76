"""The pretraining stage beside the trials (issue 18, item 4): real Ray, MLflow, fairseq.

A grid of one `pretrained` and one `random` dummy trial pretrains a tiny RoBERTa with
the real fairseq masked_lm as a Ray task: the random trial's trainer must have started
before the pretrained checkpoint was written (it did not wait), and the pretrained trial
must have started from that checkpoint. A pretraining that fails fails the pretrained trial
without starting its trainer (run FAILED, the stage's error as its reason), lets the
random one finish, exits 1 naming the stage; `--resume` then pretrains and finishes.
On a tracking server the stage publishes its checkpoint for the other nodes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sweeper import record_names
from tests.support.cluster import mlflow_server
from tests.support.sweeps import new_sweep, roles_in, run_sweeper, runs_by_role

pytestmark = pytest.mark.integration
pytest.importorskip("fairseq")

GRID = {"seed": [1], "init": ["pretrained", "random"], "framework": ["dummy"]}
PRETRAIN = {"steps": 30, "batch_size": 8, "max_tokens_per_sample": 32}


def _spec(tmp_path, tmp_path_factory, name, steps=PRETRAIN["steps"]):
    """The tiny sweep of `tests.support.sweeps` with both inits and a longer pretraining
    (its fairseq start alone outlasts a dummy trial)."""
    spec, out = new_sweep(tmp_path, tmp_path_factory, name, grid=GRID)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["model"]["pretrain"] = {**PRETRAIN, "steps": steps}
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    return spec, out


def _by_init(out, name):
    _, trials = runs_by_role(out, name)
    return {run.data.tags[record_names.TAG_INIT]: run for run in trials}


def test_random_trials_do_not_wait_for_pretraining(tmp_path, tmp_path_factory):
    # long enough to outlast Tune's start-up to its first trial (~1-4 s) on a fast
    # machine too: 30 steps took 4 s in all there (fairseq's start included), 300 took 6 s
    spec, out = _spec(tmp_path, tmp_path_factory, "beside", steps=600)
    done = run_sweeper("run", spec)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pretraining runs beside the trials" in done.stdout
    assert "pretraining done in" in done.stdout

    (checkpoint,) = (out / "pretrained").glob("*/model.pt")
    assert not (checkpoint.parent / "params.json").exists()  # counts are a trial's
    runs = _by_init(out, "beside")
    assert {init: r.info.status for init, r in runs.items()} == {
        "pretrained": "FINISHED",
        "random": "FINISHED",
    }
    written = checkpoint.stat().st_mtime
    (beside,) = (out / "trials").glob("dummy-random-*")
    # The random trial's trainer started (its job file is written as it starts) while
    # the stage was still pretraining. Not "ended before": at nice 19 beside a stage
    # that keeps every core, a trial may finish just after it on a fast machine.
    assert (beside / record_names.TRIAL_CONFIG_FILE).stat().st_mtime < written
    assert runs["pretrained"].info.start_time < written * 1000  # queued, then waited
    (folder,) = (out / "trials").glob("dummy-pretrained-*")
    job = json.loads((folder / record_names.TRIAL_CONFIG_FILE).read_text(encoding="utf-8"))
    assert job["init"] == "pretrained" and (out / "init") in Path(job["init_checkpoint"]).parents
    # beside the stage a trainer yields the CPU to it; after the stage, normal priority
    assert _command(beside).startswith("$ nice -n 19 ")
    assert not _command(folder).startswith("$ nice")


def _command(folder: Path) -> str:
    """The trainer's command line, the first line of its log."""
    return (folder / record_names.TRAINER_LOG_FILE).read_text(encoding="utf-8").splitlines()[0]


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_a_failed_pretraining_fails_only_the_pretrained_trials(tmp_path, tmp_path_factory):
    spec, out = _spec(tmp_path, tmp_path_factory, "broken")
    (out / "pretrained").write_text("a file where the stage writes its folder")
    failed = run_sweeper("run", spec)
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert "error: pretraining failed: " in failed.stderr
    assert "--resume` pretrains again" in failed.stderr
    runs = _by_init(out, "broken")
    assert runs["random"].info.status == "FINISHED"
    pretrained = runs["pretrained"]
    assert pretrained.info.status == "FAILED"
    assert pretrained.data.tags[record_names.TAG_ERROR].startswith("pretraining failed: ")
    assert not list((out / "trials").glob("dummy-pretrained-*/events.jsonl"))  # never trained

    (out / "pretrained").unlink()
    resumed = run_sweeper("run", spec, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    runs = _by_init(out, "broken")
    assert len(runs) == 2 and runs["pretrained"].info.run_id == pretrained.info.run_id
    assert runs["pretrained"].info.status == "FINISHED"


def test_on_a_tracking_server_the_stage_publishes_its_checkpoint(tmp_path, tmp_path_factory):
    """With a remote artifact store (a cluster's), the task publishes the checkpoint
    it trained beside the driver's data (invariant 7), and the pretrained trial reads
    it through the staged entry the task returned."""
    from mlflow import MlflowClient

    spec, _ = _spec(tmp_path, tmp_path_factory, "staged")
    with mlflow_server(tmp_path / "server") as server:
        done = run_sweeper("run", spec, "--tracking-uri", server.uri)
        assert done.returncode == 0, done.stderr[-3000:]
        _, trials = roles_in(MlflowClient(server.uri), "staged")
    assert sorted(r.info.status for r in trials) == ["FINISHED", "FINISHED"]
    markers = (tmp_path / "server" / "artifacts").glob("*/inputs/*/complete.json")
    roles = {json.loads(marker.read_text(encoding="utf-8"))["role"] for marker in markers}
    assert roles == {"fairseq_data", "hf_data", "pretrained:masked_lm"}
