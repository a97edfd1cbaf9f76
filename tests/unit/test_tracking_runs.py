"""Trial runs keyed by trial key, resume planning, and the driver's MLflow writer.

The rules are checked against a real MLflow SQLite store (one per module: creating a
store runs MLflow's schema migrations, which take seconds), each test in its own
experiment.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest
import yaml

from sweeper import record_names
from sweeper.spec.load import validate_mapping
from sweeper.tracking.recorder import ERROR_ARTIFACT, MetricLog, Recorder, error_tag, last_steps
from sweeper.tracking.runs import (
    ExistingRunsError,
    FoundRun,
    create_trial_run,
    find_trial_runs,
    flatten_params,
    plan_runs,
)
from sweeper.tracking.sweep_run import (
    git_state,
    open_sweep_run,
    package_versions,
    record_cluster,
    record_sweep,
)
from sweeper.trial_keys import expand
from tests.support.specs import minimal_spec

_names = itertools.count()


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from mlflow import MlflowClient

    root = tmp_path_factory.mktemp("mlflow")
    return MlflowClient(f"sqlite:///{root / 'mlflow.db'}")


@pytest.fixture
def experiment(client, tmp_path) -> str:
    return client.create_experiment(f"e{next(_names)}", artifact_location=tmp_path.as_uri())


def _spec(tmp_path: Path, **grid):
    raw = minimal_spec()
    raw["grid"] = {"seed": [1, 2], "init": ["random"], "framework": ["dummy"], **grid}
    return validate_mapping(raw, "spec.yaml", base_dir=tmp_path)


def _found(
    key: str, mlflow_status: str, status: str | None, start: int, run_id: str = ""
) -> FoundRun:
    return FoundRun(run_id or f"{key}-{start}", key, mlflow_status, status, start)


# --- pure rules ------------------------------------------------------------------------


def test_flatten_params_dotted_and_spelled_like_the_spec():
    flat = flatten_params(
        {
            "seed": 1,
            "train": {"lr": 1e-05, "adam_betas": (0.9, 0.98), "timeout_min": None},
            "lora": None,
        }
    )
    assert flat == {
        "seed": "1",
        "train.lr": "1e-05",
        "train.adam_betas": "[0.9, 0.98]",
        "train.timeout_min": "None",
        "lora": "None",
    }


def test_plan_without_resume_refuses_existing_runs():
    assert plan_runs(["a"], [], resume=False).create == ["a"]
    with pytest.raises(ExistingRunsError, match="--resume"):
        plan_runs(["a"], [_found("old", "FINISHED", "finished", 1)], resume=False)


def test_plan_resume_skips_finished_and_continues_the_rest():
    found = [
        _found("done", "FINISHED", record_names.Status.FINISHED, 1),
        _found("killed-driver", "RUNNING", record_names.Status.RUNNING, 2),
        _found("failed", "FAILED", record_names.Status.FAILED, 3),
        _found("queued", "SCHEDULED", None, 4),
        # MLflow FINISHED without sweeper's status tag is not finished (rule 1)
        _found("untagged", "FINISHED", None, 5),
    ]
    keys = ["done", "killed-driver", "failed", "queued", "untagged", "new"]
    plan = plan_runs(keys, found, resume=True)
    assert plan.done == {"done": "done-1"}
    assert plan.resume == {
        "killed-driver": "killed-driver-2",
        "failed": "failed-3",
        "queued": "queued-4",
        "untagged": "untagged-5",
    }
    assert plan.create == ["new"]


def test_plan_with_duplicate_runs_prefers_finished_then_earliest():
    found = [
        _found("k", "FAILED", "failed", 1, "first"),
        _found("k", "FINISHED", "finished", 9, "later-finished"),
        _found("j", "FAILED", "failed", 7, "j-late"),
        _found("j", "RUNNING", "running", 2, "j-early"),
    ]
    plan = plan_runs(["k", "j"], found, resume=True)
    assert plan.done == {"k": "later-finished"} and plan.resume == {"j": "j-early"}


def test_error_tag_keeps_the_reason_and_the_end():
    assert error_tag("short\n") == "short"
    text = "reason line\n" + "\n".join(f"log {i}" for i in range(5000)) + "\nthe real cause"
    tag = error_tag(text, limit=500)
    assert len(tag) <= 500
    assert tag.startswith("reason line\n[...]\n") and tag.endswith("the real cause")


def test_metric_log_logs_each_step_once():
    log = MetricLog()
    log.seed("r", {"valid_accuracy": 20})
    points = [(10, "valid_accuracy", 1.0), (20, "valid_accuracy", 2.0), (30, "valid_accuracy", 3.0)]
    assert log.new_points("r", points) == [(30, "valid_accuracy", 3.0)]
    assert log.new_points("r", [(25, "train_loss", 0.5), (25, "train_loss", 0.4)]) == [
        (25, "train_loss", 0.5)
    ]
    assert log.new_points("other", points) == [(s, k, v) for s, k, v in points]


def test_git_state_outside_a_repository(tmp_path):
    assert git_state(tmp_path) == (None, False)
    versions = package_versions()
    assert set(versions) >= {"sweeper", "torch", "fairseq", "transformers", "ray", "mlflow", "peft"}
    assert versions["mlflow"] != "absent"


# --- against a real store ----------------------------------------------------------------


def test_one_run_per_key_found_again_by_its_tag(client, experiment, tmp_path):
    spec = _spec(tmp_path)
    trials, _ = expand(spec)
    parent = open_sweep_run(client, experiment, spec)
    assert open_sweep_run(client, experiment, spec) == parent  # a resume reuses the parent
    ids = {t.key: create_trial_run(client, experiment, parent, t) for t in trials}
    found = find_trial_runs(client, experiment, spec.name)
    assert {f.trial_key: f.run_id for f in found} == ids
    assert {f.mlflow_status for f in found} == {"SCHEDULED"}
    run = client.get_run(ids[trials[0].key])
    assert run.data.tags["mlflow.parentRunId"] == parent
    assert run.data.tags[record_names.TAG_GROUP] == "dummy/random/full"
    assert run.data.tags[record_names.TAG_STAGE] == "grid"
    assert run.data.params["train.lr"] == str(spec.train.lr)
    # another sweep's runs in the same experiment are not this sweep's
    assert find_trial_runs(client, experiment, "other-sweep") == []
    plan = plan_runs([t.key for t in trials], found, resume=True)
    assert plan.resume == ids and plan.create == [] and plan.done == {}


def test_recorder_writes_statuses_metrics_and_errors(client, experiment, tmp_path):
    spec = _spec(tmp_path, seed=[1, 2])
    trials, _ = expand(spec)
    parent = open_sweep_run(client, experiment, spec)
    ok, bad = (create_trial_run(client, experiment, parent, t) for t in trials)
    recorder = Recorder(client, {"ok": ok, "bad": bad}, MetricLog())
    recorder.started("ok", "ray_0")
    report = {
        "node": "host (127.0.0.1)",
        "points": [
            [5, "train_loss", 0.7],
            [10, "valid_accuracy", 60.0],
            [10, "test_accuracy", 58.0],
        ],
    }
    assert recorder.result("ok", report) == 3
    assert recorder.result("ok", report) == 0  # a re-sent report adds nothing
    recorder.result(
        "ok",
        {"sweeper_final": True, "trainable_params": 7, "total_params": 9, "points": [],
         "versions": '{"torch":"2.13.0"}',
         record_names.REPORT_TAGS: json.dumps({record_names.TAG_PREDICTIONS: "valid,test"})},
    )  # fmt: skip
    recorder.finished("ok")
    run = client.get_run(ok)
    assert json.loads(run.data.tags[record_names.TAG_VERSIONS]) == {"torch": "2.13.0"}
    assert run.info.status == "FINISHED"
    assert run.data.tags[record_names.TAG_STATUS] == record_names.Status.FINISHED
    assert run.data.tags[record_names.TAG_RAY_TRIAL_ID] == "ray_0"
    assert run.data.tags[record_names.TAG_NODE] == "host (127.0.0.1)"
    assert run.data.tags[record_names.TAG_TRAINABLE_PARAMS] == "7"
    assert run.data.tags[record_names.TAG_PREDICTIONS] == "valid,test"
    assert [(m.step, m.value) for m in client.get_metric_history(ok, "valid_accuracy")] == [
        (10, 60.0)
    ]

    recorder.started("bad", "ray_1")
    error = "dummy trainer exited with code 3\n--- last log lines ---\n" + "x" * 9000
    recorder.failed("bad", error)
    run = client.get_run(bad)
    assert run.info.status == "FAILED"
    assert run.data.tags[record_names.TAG_STATUS] == record_names.Status.FAILED
    tag = run.data.tags[record_names.TAG_ERROR]
    assert tag.startswith("dummy trainer exited with code 3") and len(tag) <= 8000
    assert record_names.TAG_PREDICTIONS not in run.data.tags
    local = client.download_artifacts(bad, ERROR_ARTIFACT, str(tmp_path))
    assert Path(local).read_text() == error


def test_a_one_source_run_says_its_seeds_and_takes_the_trial_tags(client, experiment, tmp_path):
    spec = _spec(tmp_path, seed_source=["data_order"], held_seed=5)
    trial = expand(spec)[0][1]
    parent = open_sweep_run(client, experiment, spec)
    run_id = create_trial_run(client, experiment, parent, trial)
    run = client.get_run(run_id)
    assert run.data.tags[record_names.TAG_GROUP] == "dummy/random/full[seed_source=data_order]"
    assert run.data.tags[record_names.TAG_SEED_SOURCE] == "data_order"
    assert run.data.tags[record_names.TAG_SEED_OF["data_order"]] == "2"
    assert run.data.tags[record_names.TAG_SEED_OF["init"]] == "5"
    assert (run.data.params["seed_source"], run.data.params["seeds.dropout"]) == ("data_order", "5")
    recorder = Recorder(client, {"k": run_id}, MetricLog())
    sent = {record_names.TAG_START_WEIGHTS: "0123456789abcdef"}
    recorder.result("k", {"points": [], record_names.REPORT_TAGS: json.dumps(sent)})
    assert client.get_run(run_id).data.tags[record_names.TAG_START_WEIGHTS] == "0123456789abcdef"


def test_resumed_run_does_not_duplicate_points(client, experiment, tmp_path):
    """A new driver (after a kill) seeds its dedupe from the store, so a trainer that
    re-emits steps from its last checkpoint adds only the steps beyond."""
    spec = _spec(tmp_path, seed=[1])
    (trial,) = expand(spec)[0]
    run_id = create_trial_run(client, experiment, open_sweep_run(client, experiment, spec), trial)
    first = Recorder(client, {"k": run_id}, MetricLog())
    first.result("k", {"points": [[s, "train_loss", 1.0 / s] for s in range(1, 8)]})
    # the driver dies; a new one resumes the same run
    seeded = MetricLog()
    seeded.seed(run_id, last_steps(client, run_id))
    second = Recorder(client, {"k": run_id}, seeded)
    second.result("k", {"points": [[s, "train_loss", 1.0 / s] for s in range(5, 11)]})
    steps = [m.step for m in client.get_metric_history(run_id, "train_loss")]
    assert sorted(steps) == list(range(1, 11))


def test_a_resume_replays_no_metric_twice_whatever_its_name(client, experiment, tmp_path):
    """Per-class metrics (and any name no fixed list holds) are deduplicated after a
    resume too: the new driver seeds from every metric the run has."""
    spec = _spec(tmp_path, seed=[1])
    (trial,) = expand(spec)[0]
    run_id = create_trial_run(client, experiment, open_sweep_run(client, experiment, spec), trial)
    points = [[s, k, 50.0] for s in (10, 20) for k in ("test_f1_class1", "valid_recall_class0")]
    Recorder(client, {"k": run_id}, MetricLog()).result("k", {"points": points})
    seeded = MetricLog()
    seeded.seed(run_id, last_steps(client, run_id))
    Recorder(client, {"k": run_id}, seeded).result("k", {"points": points})  # the replay
    for key in ("test_f1_class1", "valid_recall_class0"):
        assert [m.step for m in client.get_metric_history(run_id, key)] == [10, 20]


def test_parent_run_records_spec_provenance_and_cluster(client, experiment, tmp_path):

    spec = _spec(tmp_path)
    spec_file = tmp_path / "my-sweep.yaml"
    spec_file.write_text("name: t\n# as written\n")
    parent = open_sweep_run(client, experiment, spec)
    record_sweep(client, parent, spec, spec_file, trials=2)
    resources = {"CPU": 4.0, "GPU": 1.0, "node:10.0.0.1": 1.0, "node:10.0.0.2": 1.0,
                 "node:__internal_head__": 1.0}  # fmt: skip
    record_cluster(client, parent, resources, "10.0.0.1:6379")
    run = client.get_run(parent)
    assert run.data.tags[record_names.TAG_ROLE] == record_names.ROLE_SWEEP
    assert run.data.tags["sweeper.version.mlflow"] == package_versions()["mlflow"]
    shown = json.loads(run.data.tags["sweeper.ray_resources"])
    assert shown == {"CPU": 4.0, "GPU": 1.0, "nodes": 2}
    assert run.data.tags["sweeper.ray_address"] == "10.0.0.1:6379"
    folder = tmp_path / "dl"
    folder.mkdir()
    written = client.download_artifacts(parent, record_names.ARTIFACT_SPEC, str(folder))
    assert Path(written).read_text() == "name: t\n# as written\n"
    resolved = client.download_artifacts(parent, record_names.ARTIFACT_RESOLVED_SPEC, str(folder))
    assert json.loads(Path(resolved).read_text())["grid"]["seed"] == [1, 2]


def test_sweep_record_keeps_the_spec_and_every_base_it_extends(client, experiment, tmp_path):
    from sweeper.spec.load import load_spec
    from sweeper.tracking.sweep_run import open_sweep_run, record_sweep

    (tmp_path / "base.yaml").write_text(yaml.safe_dump(minimal_spec()), encoding="utf-8")
    leaf = tmp_path / "leaf.yaml"
    leaf.write_text("extends: base.yaml\nretries: 0\n", encoding="utf-8")
    spec = load_spec(leaf)
    parent = open_sweep_run(client, experiment, spec)
    record_sweep(client, parent, spec, leaf, 1)
    got = Path(client.download_artifacts(parent, "", str(tmp_path / "down")))
    assert (got / "spec.yaml").read_text(encoding="utf-8") == leaf.read_text(encoding="utf-8")
    assert (got / "spec.bases" / "1-base.yaml").read_text(encoding="utf-8") == (
        tmp_path / "base.yaml"
    ).read_text(encoding="utf-8")
    assert json.loads((got / "spec.resolved.json").read_text(encoding="utf-8"))["retries"] == 0


def test_a_resume_with_other_package_versions_says_which(client, experiment, tmp_path, capsys):
    from sweeper.tracking.sweep_run import open_sweep_run, record_sweep, version_changes

    spec = _spec(tmp_path)
    spec_file = tmp_path / "my-sweep.yaml"
    spec_file.write_text("name: t\n")
    parent = open_sweep_run(client, experiment, spec)
    record_sweep(client, parent, spec, spec_file, trials=2)
    assert "package versions differ" not in capsys.readouterr().err  # a first run
    client.set_tag(parent, "sweeper.version.torch", "2.12.0")  # as if made before an upgrade
    assert open_sweep_run(client, experiment, spec) == parent  # the resume
    record_sweep(client, parent, spec, spec_file, trials=2)
    err = capsys.readouterr().err
    torch_now = package_versions()["torch"]
    assert f"package versions differ from the sweep's record: torch 2.12.0 -> {torch_now}" in err
    assert client.get_run(parent).data.tags["sweeper.version.torch"] == torch_now
    assert version_changes({"torch": "1"}, {"torch": "1", "peft": "2"}) == []  # older record


def test_a_correction_is_logged_at_its_step_and_becomes_its_latest_value(
    client, experiment, tmp_path
):
    spec = _spec(tmp_path)
    trials, _ = expand(spec)
    parent = open_sweep_run(client, experiment, spec)
    run_id = create_trial_run(client, experiment, parent, trials[0])
    recorder = Recorder(client, {"k": run_id}, MetricLog())
    recorder.result("k", {"points": [[10, "valid_accuracy", 70.0], [12, "train_loss", 0.5]]})
    time.sleep(0.01)  # the correction comes later, as a resumed trainer's would
    recorder.result("k", {"points": [[10, "valid_accuracy", 99.0]]})  # not a correction
    recorder.result("k", {"points": [], "corrections": [[10, "valid_accuracy", 66.0]]})
    points = client.get_metric_history(run_id, "valid_accuracy")
    assert sorted((m.step, m.value) for m in points) == [(10, 66.0), (10, 70.0)]
    assert max(points, key=lambda m: m.timestamp).value == 66.0


def test_preemptions_tag_the_run_with_a_json_list_that_stays_whole(client, experiment, tmp_path):
    import json

    spec = _spec(tmp_path, seed=[1])
    (trial,) = expand(spec)[0]
    run_id = create_trial_run(client, experiment, open_sweep_run(client, experiment, spec), trial)
    recorder = Recorder(client, {"k": run_id}, MetricLog())
    recorder.preempted("k", [(10, "head (127.0.0.2, ab)"), (None, "worker")])
    recorder.drain()
    tags = client.get_run(run_id).data.tags
    assert tags[record_names.TAG_PREEMPTIONS] == "2"
    assert json.loads(tags[record_names.TAG_PREEMPTED_ON]) == [
        [10, "head (127.0.0.2, ab)"],
        [None, "worker"],
    ]
    many = [(step, "n" * 200) for step in range(100)]  # longer than a tag may be
    recorder.preempted("k", many)
    recorder.drain()
    tags = client.get_run(run_id).data.tags
    kept = json.loads(tags[record_names.TAG_PREEMPTED_ON])
    assert tags[record_names.TAG_PREEMPTIONS] == "100"
    assert kept == [list(p) for p in many[-len(kept) :]] and 0 < len(kept) < 100
