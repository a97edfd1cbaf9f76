"""Best search configuration per group, search-trial keys, the objective every report
carries and the search table, on hand-made records (no Ray cluster, no MLflow)."""

from __future__ import annotations

import json
from dataclasses import replace

from test_summarize_select import BASE

from sweeper import record_names
from sweeper.spec.load import validate_mapping
from sweeper.summarize.records import Point, Summary
from sweeper.summarize.search import pick_best, score, search_groups
from sweeper.summarize.tables import to_markdown
from sweeper.summarize.terminal import to_plain
from sweeper.trial_keys import make_trial
from tests.support.specs import minimal_spec

RUN = replace(
    BASE,  # the summariser tests' finished trial, as a search-stage one
    run_name="hf-pretrained-full-s1-search-aaaaaa",
    end_time=2000,
    stage="search",
    search_params=json.dumps({"train.lr": 1e-4}),
)


def _run(run_id, start, lr, status=record_names.Status.FINISHED, group=None, mlflow="FINISHED"):
    return replace(
        RUN,
        run_id=run_id,
        trial_key=run_id,
        start_time=start,
        status=status,
        mlflow_status=mlflow,
        group=group or RUN.group,
        search_params=json.dumps({"train.lr": lr}),
    )


def _curve(*values):
    return tuple(Point(10 * (i + 1), i, v) for i, v in enumerate(values))


def test_score_is_the_best_validation_point_by_mode():
    assert (
        score(RUN, _curve(60, 80, 75), "max").value,
        score(RUN, _curve(60, 80, 75), "max").step,
    ) == (80, 20)
    assert score(RUN, _curve(0.6, 0.4, 0.4), "min").step == 20  # ties: earliest
    assert score(RUN, (), "max").value is None


def test_best_skips_early_stopped_failed_and_ties_go_to_the_earliest():
    runs = [
        score(_run("late", 3000, 3e-4), _curve(70, 82), "max"),
        score(_run("early", 2000, 2e-4), _curve(82), "max"),
        score(_run("stopped", 1000, 1e-3, record_names.Status.EARLY_STOPPED), _curve(95), "max"),
        score(
            _run("failed", 500, 1e-2, record_names.Status.FAILED, mlflow="FAILED"),
            _curve(99),
            "max",
        ),
    ]
    best = pick_best(runs, "max")
    assert best is not None and best.run.run_id == "early"
    assert best.params == {"train.lr": 2e-4}
    assert pick_best(runs[2:], "max") is None


def test_search_groups_count_and_choose_per_group():
    runs = [
        _run("a1", 1, 1e-4),
        _run("a2", 2, 2e-4, record_names.Status.EARLY_STOPPED),
        _run("b1", 3, 3e-4, group="hf/random/full"),
        _run("b2", 4, 4e-4, record_names.Status.RUNNING, group="hf/random/full", mlflow="RUNNING"),
        replace(_run("g1", 5, 5e-4), stage="confirm"),  # not a search run
    ]
    histories = {r.run_id: {"valid_loss": _curve(0.5, 0.3)} for r in runs}
    histories["b1"] = {"valid_loss": _curve(0.2)}
    asked = []

    def importances(name):
        asked.append(name)
        return {"train.lr": 1.0}, ""

    groups = search_groups(runs, histories, "valid_loss", "min", "demo", importances)
    assert [g.group for g in groups] == ["hf/pretrained/full", "hf/random/full"]
    pre, rand = groups
    assert (pre.trials, pre.finished, pre.early_stopped, pre.not_finished) == (2, 1, 1, 0)
    assert (pre.best_run_id, pre.best_value, pre.best_params) == ("a1", 0.3, {"train.lr": 1e-4})
    assert (rand.trials, rand.finished, rand.not_finished, rand.best_run_id) == (2, 1, 1, "b1")
    assert asked == ["demo:hf/pretrained/full", "demo:hf/random/full"]
    assert pre.importances == {"train.lr": 1.0}


def test_search_table_renders_in_every_format():
    runs = [_run("a1", 1, 1e-4), _run("a2", 2, 2e-4)]
    histories = {"a1": {"valid_accuracy": _curve(80)}, "a2": {"valid_accuracy": _curve(70)}}
    groups = search_groups(runs, histories, "valid_accuracy", "max", "demo")
    summary = Summary("demo", "1", "sqlite:///x", "demo", "p", [], [], [], [], search=groups)
    for text in (to_plain(summary), to_markdown(summary)):
        assert "Search stage." in text and "train.lr=0.0001" in text
    assert summary.to_dict()["search"][0]["best_params"] == {"train.lr": 1e-4}
    assert "Search stage." not in to_plain(replace(summary, search=[]))


def test_search_trial_keys_differ_from_the_confirm_trial_of_the_same_values(tmp_path):
    from sweeper.search.searcher import search_trial

    raw = minimal_spec()
    raw["grid"] = {"params": {"lora.r": [8]}, "method": ["full"]}
    spec = validate_mapping(raw, "spec.yaml", base_dir=tmp_path)
    base = make_trial(spec, seed=1, init="random", framework="hf", method="full")
    found = search_trial(spec, base, {"train.lr": 3e-4})
    confirm = make_trial(
        spec, seed=1, init="random", framework="hf", method="full", varied={"train.lr": 3e-4}
    )
    assert found.train["lr"] == 3e-4 and found.stage == "search"
    assert found.group == base.group and found.name == base.name  # the group's, not the values'
    assert found.key != confirm.key
    assert found.key == search_trial(spec, base, {"train.lr": 3e-4}).key  # same values, same key
    assert replace(confirm, varied={}).key == confirm.key  # varied does not enter the key


def test_objective_holds_reports_until_a_validation_and_tracks_the_best():
    from sweeper.search.searcher import OBJECTIVE, ObjectiveReport

    sent = []
    report = ObjectiveReport(sent.append, "valid_accuracy", "max")
    report({"step": 3, "points": [[3, "train_loss", 0.9]]})
    assert sent == []  # no objective yet: held back
    report({"step": 10, "valid_accuracy": 70.0, "points": [[10, "valid_accuracy", 70.0]]})
    report({"step": 20, "valid_accuracy": 65.0, "points": []})
    report({"sweeper_final": True, "step": 20, "points": []})
    assert [r[OBJECTIVE] for r in sent] == [70.0, 70.0, 70.0]
    assert sent[0]["points"] == [[3, "train_loss", 0.9], [10, "valid_accuracy", 70.0]]

    low = []
    report = ObjectiveReport(low.append, "valid_loss", "min")
    for value in (0.5, 0.3, 0.4):
        report({"valid_loss": value, "points": []})
    assert [r[OBJECTIVE] for r in low] == [0.5, 0.3, 0.3]


def test_a_trial_ending_without_its_final_report_is_early_stopped(tmp_path):
    import io
    from types import SimpleNamespace

    from mlflow import MlflowClient

    from sweeper.search.searcher import SearchCallback
    from sweeper.tracking.recorder import MetricLog, Recorder
    from sweeper.tune.progress import FINISHED, Progress, TrialView
    from sweeper.tune.trainable import CONFIG_KEY, FINAL

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("e", artifact_location=str(tmp_path / "art"))
    runs = {key: client.create_run(experiment).info.run_id for key in ("stopped", "done")}
    views = {key: TrialView(name=key, total=20) for key in runs}
    recorder = Recorder(client, runs, MetricLog())
    callback = SearchCallback(recorder, Progress(views, stream=io.StringIO(), live=False))
    for key, last in (("stopped", {"step": 10}), ("done", {FINAL: True, "step": 20})):
        trial = SimpleNamespace(config={CONFIG_KEY: key}, last_result=last)
        callback.on_trial_complete(1, [], trial)
    recorder.drain()

    stopped, done = (client.get_run(runs[key]) for key in ("stopped", "done"))
    assert stopped.data.tags[record_names.TAG_STATUS] == record_names.Status.EARLY_STOPPED
    assert done.data.tags[record_names.TAG_STATUS] == record_names.Status.FINISHED
    assert stopped.info.status == done.info.status == "FINISHED"
    assert callback.ended == {"stopped", "done"}
    assert all(view.status == FINISHED for view in views.values())
    assert "stopped: early-stopped (ASHA) at step 10" in callback.progress.stream.getvalue()
