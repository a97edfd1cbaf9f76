"""The grid engine in-process: open + plan on a real SQLite store, and `run_grid` driven
by a fake Tuner that plays Tune's callback events (no Ray cluster, no trainer process:
neither is the point here; tests/integration/test_run_*.py run both for real)."""

from __future__ import annotations

import argparse
import contextlib
import io
import pickle
import shutil
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from sweeper import record_names
from sweeper.engine import EXIT_BAD_INPUT, EXIT_FAILED, RunOptions, SweepError
from sweeper.spec.load import validate_mapping
from tests.support.specs import minimal_spec

pytest.importorskip("mlflow")


@pytest.fixture(scope="module")
def template_store(tmp_path_factory) -> Path:
    """An empty migrated MLflow SQLite store (migrations take seconds: pay them once)."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("engine") / "template.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


def _spec(tmp_path: Path, template: Path, **grid: Any):
    raw = minimal_spec()
    raw["name"] = "eng"
    raw["output_dir"] = str(tmp_path / "out")
    raw["grid"] = {"seed": [1, 2], "init": ["random"], "framework": ["hf"], **grid}
    (tmp_path / "out").mkdir()
    shutil.copy(template, tmp_path / "out" / "mlflow.db")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    return validate_mapping(raw, "spec.yaml", base_dir=tmp_path)


def _options(path: Path | None = None, **changes: Any) -> RunOptions:
    """Options as `sweeper run SPEC train.epochs=1` gives them (SPEC: the file _spec
    wrote, where the parent run's record reads it)."""
    spec_path = str(path / "spec.yaml") if path else "spec.yaml"
    return RunOptions(spec_path=spec_path, overrides=("train.epochs=1",), **changes)


def test_options_say_how_to_resume():
    assert _options().resume_command() == "sweeper run spec.yaml train.epochs=1 --resume"
    assert len(_options().stamp) == len("20250101-120000")


def test_open_and_plan_applies_the_resume_rules(tmp_path, template_store, capsys):
    from sweeper.engine.open_store import open_and_plan
    from sweeper.engine.sweep import open_grid
    from sweeper.tracking.runs import create_trial_run

    spec = _spec(tmp_path, template_store)
    sweep = open_grid(_options(), spec)
    keys = list(sweep.trials)
    assert len(keys) == 2 and sweep.plan.create == keys and sweep.stage == record_names.Stage.GRID
    assert "sweep 'eng' (experiment 'eng' at sqlite:///" in capsys.readouterr().out
    assert sweep.uri == f"sqlite:///{Path(spec.output_dir) / 'mlflow.db'}"

    client = sweep.client
    done, cut = (create_trial_run(client, sweep.experiment_id, "p", sweep.trials[k]) for k in keys)
    client.set_tag(done, record_names.TAG_STATUS, record_names.Status.FINISHED)
    client.set_terminated(done, status=record_names.RunState.FINISHED)

    with pytest.raises(SweepError) as refused:  # runs exist, no --resume: bad input
        open_and_plan(_options(), spec, keys)
    assert refused.value.exit_code == EXIT_BAD_INPUT
    assert refused.value.message.startswith("sweep 'eng' (experiment 'eng' at sqlite:///")
    assert "pass --resume" in refused.value.message

    store = open_and_plan(_options(resume=True), spec, keys)
    assert store.plan.done == {keys[0]: done} and store.plan.resume == {keys[1]: cut}
    assert store.plan.create == [] and {f.run_id for f in store.found} == {done, cut}
    assert open_and_plan(_options(resume=True), spec, []).plan.create == []


def test_an_unreachable_server_is_bad_input(tmp_path, template_store):
    from sweeper.engine.open_store import open_and_plan

    spec = _spec(tmp_path, template_store)
    with pytest.raises(SweepError) as refused:
        open_and_plan(_options(tracking_uri="http://127.0.0.1:9"), spec, [])
    assert refused.value.exit_code == EXIT_BAD_INPUT
    assert "cannot reach the MLflow tracking server at http://127.0.0.1:9" in str(refused.value)


def test_without_a_tracking_uri_the_store_is_found_by_the_one_precedence(
    tmp_path, template_store, monkeypatch
):
    """`api.run_sweep` without `RunOptions.tracking_uri` opens the store `sweeper run`
    and `sweeper summarize` would (`sweeper.deploy.resolve`): here $MLFLOW_TRACKING_URI's."""
    from sweeper.engine.open_store import open_and_plan, sweep_lease

    spec = _spec(tmp_path, template_store)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    for opening in (
        lambda: open_and_plan(_options(), spec, []),
        lambda: sweep_lease(_options(), spec).__enter__(),
    ):
        with pytest.raises(SweepError) as refused:
            opening()
        assert "tracking server at http://127.0.0.1:9" in refused.value.message


class FakeTuner:
    """Plays what Tune would do with each key: start, one report, then the fate the test
    chose ("finish", "fail", or "stop": the sweep is interrupted before it ends)."""

    def __init__(self, fates: dict[str, str], callbacks: list[Any]):
        self.fates = fates
        (self.callback,) = callbacks

    def fit(self) -> None:
        from sweeper.tune.trainable import CONFIG_KEY, FINAL

        for index, (key, fate) in enumerate(self.fates.items()):
            trial = SimpleNamespace(
                config={CONFIG_KEY: key}, trial_id=f"t{index}", num_failures=0,
                pickled_error_file=None, error_file=None,
                get_pickled_error=lambda: None, get_error=lambda: "Failure # 1\nboom",
            )  # fmt: skip
            points = [[10, record_names.METRIC_VALID_ACC, 60.0 + index]]
            report = {"step": 10, "valid_accuracy": 60.0 + index, "points": points}
            self.callback.on_trial_start(iteration=1, trials=[], trial=trial)
            self.callback.on_trial_result(iteration=1, trials=[], trial=trial, result=report)
            if fate == "finish":
                last = {FINAL: True, "step": 10, "points": [], "trainable_params": 5}
                self.callback.on_trial_result(iteration=2, trials=[], trial=trial, result=last)
                self.callback.on_trial_complete(iteration=2, trials=[], trial=trial)
            elif fate == "fail":
                self.callback.on_trial_error(iteration=2, trials=[], trial=trial)
            self.callback.on_step_end(iteration=2, trials=[])


@pytest.fixture
def fake_ray(monkeypatch):
    """No Ray: a session that starts nothing, a Tuner builder that records its call
    and returns a FakeTuner playing `fates` (set by the test), no summary tables."""
    from sweeper.engine import grid
    from sweeper.engine.session import RaySession
    from sweeper.tune import tuner

    seen: dict[str, Any] = {"fates": {}}

    @contextmanager
    def session(options, spec):
        seen["sessions"] = seen.get("sessions", 0) + 1
        yield SimpleNamespace(
            describe=RaySession(None, False).describe, resources=lambda: {"CPU": 2.0}
        )

    def build_tuner(ctx, trainable, **kwargs):
        seen.update(ctx=ctx, trainable=trainable, **kwargs)
        fates = {key: seen["fates"].get(key, "finish") for key in kwargs["keys"]}
        return FakeTuner(fates, kwargs["callbacks"])

    monkeypatch.setattr(grid, "ray_session", session)
    monkeypatch.setattr(tuner, "build_tuner", build_tuner)
    monkeypatch.setattr(grid, "summarise", lambda *a, **k: seen.setdefault("summarised", a))
    monkeypatch.setattr("sys.stdout", io.StringIO())  # the progress view's lines
    return seen


def _inputs(tmp_path: Path):
    from sweeper.trainers.trial_pipeline import SweepInputs

    return SweepInputs(
        {"fairseq": tmp_path / "fs", "hf": tmp_path / "hf"}, tmp_path, 100, 2, 80, {}
    )


def test_run_grid_records_every_fate_and_resume_runs_only_the_rest(
    tmp_path, template_store, fake_ray, capsys
):
    from sweeper.engine.grid import run_grid
    from sweeper.engine.sweep import open_grid
    from sweeper.tune.trainable import run_ray_trial

    spec = _spec(tmp_path, template_store, seed=[1, 2, 3])
    options = _options(tmp_path, max_concurrent=3)
    sweep = open_grid(options, spec)
    ok, bad, cut = keys = list(sweep.trials)
    fake_ray["fates"] = {bad: "fail", cut: "stop"}
    assert run_grid(sweep, _inputs(tmp_path)) == EXIT_FAILED

    assert fake_ray["trainable"] is run_ray_trial and fake_ray["keys"] == keys
    assert fake_ray["name"] == f"eng-{options.stamp}" and fake_ray["max_concurrent"] == 3
    assert fake_ray["ctx"].tracking_uri == sweep.uri and set(fake_ray["ctx"].runs) == set(keys)
    client = sweep.client
    runs = {key: client.get_run(fake_ray["ctx"].runs[key].run_id) for key in keys}
    assert runs[ok].info.status == "FINISHED"
    assert runs[ok].data.tags[record_names.TAG_STATUS] == record_names.Status.FINISHED
    assert runs[ok].data.tags[record_names.TAG_TRAINABLE_PARAMS] == "5"
    assert runs[ok].data.metrics[record_names.METRIC_VALID_ACC] == 60.0
    assert (
        runs[bad].info.status == "FAILED" and "boom" in runs[bad].data.tags[record_names.TAG_ERROR]
    )
    assert runs[cut].info.status == "KILLED"  # interrupted: resumable
    (parent,) = (r for r in client.search_runs([sweep.experiment_id]) if r.info.run_id not in {
        run.info.run_id for run in runs.values()
    })  # fmt: skip
    assert parent.info.status == "FAILED"
    assert parent.data.tags["sweeper.ray_address"] == "local"
    err = capsys.readouterr().err
    assert "2 trial(s) did not finish" in err
    assert f"`{options.resume_command()}` runs them again" in err

    again = open_grid(_options(tmp_path, resume=True), spec)  # a second driver, --resume
    assert again.plan.done == {ok: runs[ok].info.run_id} and again.plan.create == []
    fake_ray["fates"] = {}
    assert run_grid(again, _inputs(tmp_path)) == 0
    assert fake_ray["keys"] == [bad, cut]  # the finished trial is not run again
    assert {client.get_run(runs[k].info.run_id).info.status for k in keys} == {"FINISHED"}
    # Each run's cost ledger: the resumed driver numbered its attempts after the first
    # driver's (failed and interrupted ones lost) and added them to the totals.
    for key, lost in ((ok, [0.0]), (bad, [1.0, 0.0]), (cut, [1.0, 0.0])):
        run_id = runs[key].info.run_id
        attempts = client.get_metric_history(run_id, record_names.METRIC_ATTEMPT_LOST)
        assert [(m.step, m.value) for m in attempts] == list(enumerate(lost, start=1)), key
        held = client.get_metric_history(run_id, record_names.METRIC_ATTEMPT_CPU)
        totals = client.get_run(run_id).data.metrics
        assert totals[record_names.METRIC_COST_CPU] == pytest.approx(sum(m.value for m in held))
        assert totals[record_names.METRIC_COST_ATTEMPTS] == len(lost)
        assert totals[record_names.METRIC_COST_LOST_ATTEMPTS] == sum(lost)


def test_a_store_down_past_the_bound_ends_with_exit_1_and_says_how_to_go_on(
    tmp_path, template_store, fake_ray, monkeypatch
):
    from sweeper.engine.grid import run_grid
    from sweeper.engine.sweep import open_grid
    from sweeper.tracking.outbox import TrackingDown
    from sweeper.tracking.recorder import Recorder

    def down(self):
        raise TrackingDown(300, 4, ConnectionError("refused"))

    monkeypatch.setattr(Recorder, "check", down)
    sweep = open_grid(_options(tmp_path), _spec(tmp_path, template_store))
    with pytest.raises(SweepError) as stopped:
        run_grid(sweep, _inputs(tmp_path))
    assert stopped.value.exit_code == EXIT_FAILED
    text = stopped.value.message
    assert text.startswith(f"{sweep.uri}: the tracking store has been unreachable for 300s")
    assert "\nevery trial's metrics are kept in its events file under " in text
    assert f"`{sweep.options.resume_command()}` records them" in text


def test_prepare_turns_input_errors_into_exit_codes(monkeypatch, tmp_path, template_store):
    from sweeper.data.errors import DataError
    from sweeper.engine.sweep import prepare
    from sweeper.trainers import trial_pipeline
    from sweeper.trainers.runner import TrainerError

    spec = _spec(tmp_path, template_store)
    for error, code, text in (
        (DataError("bad line", Path("train.txt")), EXIT_BAD_INPUT, "train.txt"),
        (TrainerError("pretrain exited with code 1", []), EXIT_FAILED, "pretraining failed: "),
    ):

        def fails(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(trial_pipeline, "prepare_inputs", fails)
        with pytest.raises(SweepError) as raised:
            prepare(spec)
        assert raised.value.exit_code == code and text in raised.value.message


def _cli_args(spec: Path, *extra: str) -> argparse.Namespace:
    from sweeper.cli import run

    parser = argparse.ArgumentParser()
    run.build_parser(parser)
    return parser.parse_intermixed_args([str(spec), *extra])


def test_the_cli_prints_engine_errors_and_exits_with_their_status(
    tmp_path, monkeypatch, capsys, write_spec
):
    from sweeper.cli import run
    from sweeper.engine import grid, open_store, preflight

    raw = minimal_spec()
    path = write_spec(raw)
    monkeypatch.setattr(preflight, "preflight", lambda spec: ["m/model.pt: not found"])
    assert run.run(_cli_args(path)) == EXIT_BAD_INPUT
    assert capsys.readouterr().err == "error: m/model.pt: not found\n"

    monkeypatch.setattr(preflight, "preflight", lambda spec: [])
    monkeypatch.setattr(open_store, "sweep_lease", lambda options, spec: contextlib.nullcontext())
    seen = []

    def engine(options, spec):
        seen.append(options)
        raise SweepError("store gone\nmore", EXIT_FAILED)

    monkeypatch.setattr(grid, "run_grid_sweep", engine)
    args = _cli_args(path, "train.epochs=1", "--resume", "--max-concurrent", "2")
    assert run.run(args) == EXIT_FAILED
    assert capsys.readouterr().err == "error: store gone\nmore\n"
    (options,) = seen
    assert (options.spec_path, options.overrides) == (str(path), ("train.epochs=1",))
    assert (options.resume, options.max_concurrent, options.address) == (True, 2, None)

    with pytest.raises(SystemExit) as refused:
        run.run(_cli_args(path, "--max-concurrent", "0"))
    assert refused.value.code == EXIT_BAD_INPUT
    assert "error: --max-concurrent must be at least 1" in capsys.readouterr().err


def test_until_decided_flags_are_checked_and_reach_the_engine(monkeypatch, capsys, write_spec):
    from sweeper.cli import run
    from sweeper.engine import open_store, preflight, until_decided

    path = write_spec(minimal_spec())  # grid.seed [1, 2, 3] by default
    monkeypatch.setattr(preflight, "preflight", lambda spec: [])
    monkeypatch.setattr(open_store, "sweep_lease", lambda options, spec: contextlib.nullcontext())
    seen = []
    monkeypatch.setattr(
        until_decided, "run_until_decided", lambda o, s, budget: seen.append(budget) or 0
    )
    assert run.run(_cli_args(path, "--until-decided")) == 0
    assert run.run(_cli_args(path, "--until-decided", "--max-seeds", "5", "--seed-batch", "1")) == 0
    assert seen == [until_decided.Budget(9, 3), until_decided.Budget(5, 1)]
    for extra, message in (
        (["--max-seeds", "5"], "--max-seeds and --seed-batch go with --until-decided"),
        (["--until-decided", "--max-seeds", "2"], "--max-seeds 2 is below the grid's 3 seeds"),
        (["--until-decided", "--seed-batch", "0"], "--seed-batch must be at least 1"),
    ):
        with pytest.raises(SystemExit) as refused:
            run.run(_cli_args(path, *extra))
        assert refused.value.code == EXIT_BAD_INPUT
        assert f"error: {message}" in capsys.readouterr().err
    searched = minimal_spec()
    searched["grid"] = {"seed": [2, 3]}
    searched["search"] = {"space": {"train.lr": {"type": "uniform", "low": 0.1, "high": 1}}}
    with pytest.raises(SystemExit) as refused:
        run.run(_cli_args(write_spec(searched), "--until-decided"))
    assert refused.value.code == EXIT_BAD_INPUT
    assert "error: --until-decided runs grid sweeps" in capsys.readouterr().err


def test_until_decided_stops_for_the_first_reason_that_holds():
    from sweeper.engine.until_decided import Budget, _next_seeds, _stop_reason

    budget = Budget(max_seeds=6, batch=3)
    assert _stop_reason(1, {"g"}, 3, budget).startswith("a trial did not finish")
    assert _stop_reason(0, set(), 3, budget) == "every comparison is decided"
    assert _stop_reason(0, {"g"}, 6, budget).startswith("--max-seeds 6 reached")
    assert _stop_reason(0, {"g"}, 3, budget) is None
    assert _next_seeds([1, 2, 5], 2) == [6, 7]


def test_the_tracking_callback_keeps_its_state_through_tunes_api():
    pytest.importorskip("ray")
    from sweeper.tune.callback import TrackingCallback

    callback = TrackingCallback(recorder=SimpleNamespace(lock=lambda: None), progress=None)  # type: ignore[arg-type]
    callback.ended.update({"k1", "k2"})
    assert callback.get_state() == {"ended": {"k1", "k2"}}
    copy = pickle.loads(pickle.dumps(callback))  # Tune pickles callbacks into tuner.pkl
    assert copy.ended == {"k1", "k2"} and copy.recorder is None and copy.progress is None
    fresh = TrackingCallback(recorder=None, progress=None)  # type: ignore[arg-type]
    fresh.set_state({"ended": {"k3"}})
    assert fresh.ended == {"k3"}


def test_resources_no_node_can_hold_are_named():
    from sweeper.engine.resources import Node, unfit

    laptop = [Node("this machine", 2, 0)]
    assert unfit(1, 0, laptop) is None
    why = unfit(1, 0.5, laptop)
    assert why is not None and "1 CPUs and 0.5 GPUs" in why
    assert "this machine: 2 CPUs, 0 GPUs" in why and "resources.gpu=0" in why
    assert "at most 2" in (unfit(4, 0, laptop) or "")
    cluster = [Node("10.0.0.1", 8, 0), Node("10.0.0.2", 4, 1)]
    assert unfit(2, 0.5, cluster) is None  # a GPU node with the CPUs too
    assert unfit(8, 0.5, cluster) is not None  # CPUs and GPU on no single node


def test_waiting_for_nodes_needs_a_cluster():
    """This machine does not grow: asked to wait without --address, the check says so at
    once instead of sleeping out the time-out."""
    from sweeper.engine.resources import check_resources

    with pytest.raises(SweepError) as refused:
        check_resources(1, 64, None, wait_s=600)
    assert "64 GPUs" in refused.value.message and "give --address" in refused.value.message
