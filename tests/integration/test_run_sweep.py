"""`sweeper run` end to end: real Ray, real MLflow, real fairseq and HF trials.

A 2-trial grid (fairseq and HF, random init, 1 seed, 2 epochs of 10 updates) must leave
one parent run and one FINISHED child per trial key, with step metrics, the best
checkpoint, the trial's files and its per-example predictions (counting to the recorded
best accuracies exactly) as artifacts, and `summarize --evaluate` must find both stored
checkpoints giving their recorded test accuracy and every stored test prediction again;
and bad input must stop the command with exit 2 before anything is created.
"""

from __future__ import annotations

import json
import socket
import time

import pytest

from sweeper import record_names
from tests.support.reliability import record
from tests.support.sweeps import (
    TEST,
    TRAIN,
    artifacts,
    assert_runs_carry_table1,
    history,
    new_sweep,
    run_sweeper,
    runs_by_role,
    stored_predictions,
)

pytestmark = pytest.mark.integration


def test_a_grid_of_real_trials_is_recorded(tmp_path, tmp_path_factory):
    pytest.importorskip("fairseq")
    spec, out = new_sweep(
        tmp_path,
        tmp_path_factory,
        "real",
        grid={"framework": ["fairseq", "hf"], "seed": [1]},
        train={"batch_size": 2},  # 40 updates an epoch: train losses every 25 (trainers' default)
    )
    done = run_sweeper("run", spec)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[2/2 done]" in done.stdout
    assert "Table 1." in done.stdout and "2 trials counted" in done.stdout

    parents, trials = runs_by_role(out, "real")
    assert len(parents) == 1 and len(trials) == 2
    (parent,) = parents
    assert parent.info.status == "FINISHED"
    assert {"spec.yaml", "spec.resolved.json", "report"} <= set(artifacts(out, parent.info.run_id))
    assert parent.data.tags["sweeper.version.ray"] and parent.data.tags["sweeper.ray_resources"]
    assert {t.data.tags[record_names.TAG_FRAMEWORK] for t in trials} == {"fairseq", "hf"}
    assert len({t.data.tags[record_names.TAG_TRIAL_KEY] for t in trials}) == 2
    for run in trials:
        tags, run_id = run.data.tags, run.info.run_id
        assert run.info.status == "FINISHED", tags.get(record_names.TAG_ERROR)
        assert tags[record_names.TAG_STATUS] == record_names.Status.FINISHED
        assert tags["mlflow.parentRunId"] == parent.info.run_id
        assert tags[record_names.TAG_STAGE] == "grid" and tags[record_names.TAG_SEED] == "1"
        assert tags[record_names.TAG_RAY_TRIAL_ID]
        assert "(127.0.0.1, " in tags[record_names.TAG_NODE]  # embedded Ray stays on loopback
        trained_with = json.loads(tags[record_names.TAG_VERSIONS])  # sent from the trial's node
        assert trained_with["torch"] == parent.data.tags["sweeper.version.torch"]
        assert int(tags[record_names.TAG_TRAINABLE_PARAMS]) > 0
        assert run.data.params["train.batch_size"] == "2"
        steps = [TRAIN // 2, 2 * TRAIN // 2]
        for key in (
            record_names.METRIC_VALID_ACC,
            record_names.METRIC_TEST_ACC,
            record_names.METRIC_EPOCH,
        ):
            assert [s for s, _ in history(out, run_id, key)] == steps, key
        assert [s for s, _ in history(out, run_id, record_names.METRIC_TRAIN_LOSS)] == [25, 50, 75]
        for key in ("process_memory_usage_megabytes", "process_cpu_utilization_percentage"):
            sampled = history(out, run_id, f"system/{key}")  # the run page's System metrics
            assert set(steps) <= {s for s, _ in sampled}, key  # each validation point
            assert all(value >= 0 for _, value in sampled)
        memory = history(out, run_id, "system/process_memory_usage_megabytes")
        assert max(value for _, value in memory) > 50  # a trainer with torch loaded
        assert {"checkpoints", "trial.json", "trainer.log", "events.jsonl"} <= set(
            artifacts(out, run_id)
        )
        assert artifacts(out, run_id, record_names.ARTIFACT_BEST_CHECKPOINT)
        assert tags[record_names.TAG_PREDICTIONS] == "valid,test"
        assert artifacts(out, run_id, record_names.ARTIFACT_PREDICTIONS_DIR) == [
            "predictions/test.json",
            "predictions/valid.json",
        ]
        metrics = run.data.metrics
        for split in ("valid", "test"):
            stored = stored_predictions(out, run_id, split, tmp_path / run_id)
            best = stored.at("best")
            assert best.step == metrics[record_names.METRIC_BEST_STEP]
            assert best.accuracy == metrics[f"best_{split}_accuracy"], (run.info.run_name, split)

    assert_runs_carry_table1(spec, trials)  # fairseq's and HF's best_* metrics
    # The stored best checkpoints, reloaded by each framework, give the recorded accuracy.
    checked = run_sweeper("summarize", spec, "--evaluate", "--no-log")
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert f"ok ({TEST} of {TEST} examples agree)" in checked.stdout
    assert f"2 of 2 agree, exactly; {2 * TEST} of {2 * TEST} test examples agree" in checked.stdout


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_tracking_server_exits_2_naming_it(tmp_path, tmp_path_factory):
    spec, out = new_sweep(tmp_path, tmp_path_factory, "noserver")
    uri = f"http://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    done = run_sweeper("run", spec, "--tracking-uri", uri, timeout=60)
    elapsed = time.monotonic() - started
    assert done.returncode == 2
    # Refused at once, not after MLflow's retry schedule (minutes); generous for slow,
    # loaded machines.
    assert elapsed < 30
    assert uri in done.stderr
    assert not (out / "ray").exists() and not (out / "trials").exists()
    assert runs_by_role(out, "noserver") == ([], [])  # nothing in the local store either
    message = done.stderr.strip().splitlines()[-1]
    record(
        "d. tracking server down at start",
        f"`--tracking-uri {uri}`: a port with no server listening",
        f"exit 2 in {elapsed:.1f} s; message: {message}; runs created: 0; "
        "Ray started: no; trial folders created: no",
    )


def test_a_bad_spec_exits_2_before_anything_starts(tmp_path, tmp_path_factory):
    spec, out = new_sweep(tmp_path, tmp_path_factory, "badspec")
    done = run_sweeper("run", spec, "train.epochs=0", "grid.framework=[torch]", timeout=60)
    assert done.returncode == 2
    assert "train.epochs" in done.stderr and "grid.framework" in done.stderr
    assert not (out / "ray").exists()
    assert runs_by_role(out, "badspec") == ([], [])
