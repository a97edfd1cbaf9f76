"""The Optuna side of a search on real (SQLite / in-memory) Optuna studies: names,
distributions, resume bookkeeping, sampler seeds and parameter importances."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from sweeper.spec.load import validate_mapping
from sweeper.tracking.study import (
    completed,
    distributions,
    importances,
    make_sampler,
    open_existing,
    open_study,
    reconcile,
    reset_study,
    storage_url,
    study_name,
)
from tests.support.specs import minimal_spec

SPACE = {
    "train.lr": {"type": "loguniform", "low": 1e-5, "high": 1e-3},
    "train.dropout": {"type": "uniform", "low": 0.0, "high": 0.3},
    "train.epochs": {"type": "int", "low": 1, "high": 4},
    "lora.r": {"type": "choice", "values": [8, 16]},
}


def _spec(tmp_path):
    raw = minimal_spec()
    raw["search"] = {"space": SPACE, "num_samples": 4}
    raw.setdefault("grid", {})["seed"] = [2, 3, 4]  # confirm seeds: not the tuning seed 1
    return validate_mapping(raw, "spec.yaml", base_dir=tmp_path)


def test_storage_beside_the_default_store_and_names_per_group(tmp_path):
    spec = _spec(tmp_path)
    assert storage_url(spec) == f"sqlite:///{(tmp_path / 'out').resolve()}/optuna.db"
    assert study_name("demo", "hf/pretrained/full") == "demo:hf/pretrained/full"
    assert study_name("demo", "hf/random/full") != study_name("demo", "hf/pretrained/full")


def test_distributions_follow_the_spec(tmp_path):
    found = distributions(_spec(tmp_path).search.space)
    lr, dropout, epochs, rank = (found[k] for k in SPACE)
    assert isinstance(lr, optuna.distributions.FloatDistribution) and lr.log
    assert (lr.low, lr.high) == (1e-5, 1e-3)
    assert isinstance(dropout, optuna.distributions.FloatDistribution) and not dropout.log
    assert isinstance(epochs, optuna.distributions.IntDistribution)
    assert (epochs.low, epochs.high) == (1, 4)
    assert rank.choices == (8, 16)


def _ask(study, space):
    return study.ask(fixed_distributions=space)


def test_killed_trials_fail_and_their_params_come_back(tmp_path):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    space = distributions(_spec(tmp_path).search.space)
    study = open_study(url, "s:g", "max")
    study.tell(_ask(study, space), 70.0)
    study.tell(_ask(study, space), state=TrialState.PRUNED)
    running = _ask(study, space)  # what a SIGKILLed driver leaves behind

    again = open_study(url, "s:g", "max")  # the resumed driver
    assert completed(again) == 2
    stale = reconcile(again)
    assert stale == [running.params]
    assert again.trials[running.number].state == TrialState.FAIL
    assert completed(again) == 2 and reconcile(again) == []

    again.enqueue_trial(stale[0])
    rerun = _ask(again, space)
    assert rerun.params == running.params and rerun.number == 3  # numbering carries on


def test_reset_and_open_existing(tmp_path):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    assert open_existing(url, "s:g") is None
    assert not (tmp_path / "optuna.db").exists()  # looking does not create a store
    study = open_study(url, "s:g", "min")
    study.tell(study.ask({"x": optuna.distributions.FloatDistribution(0, 1)}), 1.0)
    assert len(open_existing(url, "s:g").trials) == 1
    reset_study(url, "s:g")
    reset_study(url, "s:g")  # absent: nothing to do
    assert open_existing(url, "s:g") is None
    assert open_study(url, "s:g", "min").trials == []


def test_sampler_seed_depends_on_study_and_progress():
    first = make_sampler("s:a", 8, 0)
    assert type(first) is optuna.samplers.TPESampler
    space = {"x": optuna.distributions.FloatDistribution(0, 1)}

    def draw(sampler):
        study = optuna.create_study(sampler=sampler)
        return study.ask(space).params["x"]

    assert draw(make_sampler("s:a", 8, 0)) == draw(make_sampler("s:a", 8, 0))
    assert draw(make_sampler("s:a", 8, 0)) != draw(make_sampler("s:a", 8, 3))
    assert draw(make_sampler("s:a", 8, 0)) != draw(make_sampler("s:b", 8, 0))


def _study(values, space):
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(0))
    for value in values:
        trial = study.ask(space)
        study.tell(trial, value(trial.params) if callable(value) else value)
    return study


def test_importances_name_the_parameter_that_matters():
    space = {
        "train.lr": optuna.distributions.FloatDistribution(1e-5, 1e-1, log=True),
        "train.dropout": optuna.distributions.FloatDistribution(0.0, 0.3),
    }
    study = _study([lambda p: -abs(p["train.lr"] - 1e-3) * 1e4] * 30, space)
    found, _ = importances(study)
    assert set(found) == set(space)
    assert sum(found.values()) == pytest.approx(1.0)
    assert found["train.lr"] > found["train.dropout"]


def test_importances_are_undefined_below_two_trials_and_whole_for_one_param():
    space = {"train.lr": optuna.distributions.FloatDistribution(1e-5, 1e-1, log=True)}
    found, note = importances(_study([1.0], space))
    assert found == {} and "at least 2" in note
    found, _ = importances(_study([1.0, 2.0, 3.0], space))
    assert found == {"train.lr": pytest.approx(1.0)}


@pytest.mark.parametrize(
    ("search", "message"),
    [
        ({"tuning_seeds": [1, 2]}, "search.tuning_seeds: give one seed"),
        ({"space": {"lora.r": {"type": "choice", "values": [8]}}}, "lora.r: in both grid.params"),
    ],
)
def test_run_refuses_what_the_search_engine_cannot_run(tmp_path, search, message):
    from sweeper.engine import EXIT_BAD_INPUT, SweepError
    from sweeper.search.run import check_search

    raw = minimal_spec()
    raw["grid"] = {"seed": [3, 4], "params": {"lora.r": [8, 16]}}
    raw["search"] = {"space": {"train.lr": SPACE["train.lr"]}, **search}
    with pytest.raises(SweepError) as raised:
        check_search("spec.yaml", validate_mapping(raw, "spec.yaml", base_dir=tmp_path))
    assert raised.value.exit_code == EXIT_BAD_INPUT == 2
    assert f"spec.yaml: {message}" in raised.value.message
