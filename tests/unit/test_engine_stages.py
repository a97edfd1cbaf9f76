"""The stage graph's decisions, on real specs and a real run plan (no Ray needed):
when pretraining runs beside the trials, in which order the trials are queued, and
what the stage reserves on the driver's node. The stage itself, on Ray with a real
fairseq pretraining, is tests/integration/test_run_stages.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sweeper.engine.options import RunOptions
from sweeper.engine.stage_graph import pretrain_beside, trial_order
from sweeper.engine.sweep import Sweep
from sweeper.spec.load import validate_mapping
from sweeper.tracking.runs import RunPlan
from sweeper.trial_keys import expand
from tests.support.specs import minimal_spec


def _sweep(tmp_path: Path, init: list[str], pretrain: bool = True, **cpu: Any) -> Sweep:
    raw = minimal_spec()
    raw["grid"] = {"seed": [1, 2], "init": init, "framework": ["fairseq"]}
    raw["resources"] = {"cpu": 1, **cpu}
    if pretrain:
        del raw["model"]["checkpoint"]
        raw["model"]["pretrain"] = {"steps": 10}
    spec = validate_mapping(raw, "spec.yaml", base_dir=tmp_path)
    trials = {t.key: t for t in expand(spec)[0]}
    plan = RunPlan(done={}, resume={}, create=list(trials))
    return Sweep(RunOptions("spec.yaml"), spec, trials, plan, None, "0", "sqlite:///x")  # type: ignore[arg-type]


def test_pretraining_runs_beside_only_when_something_else_can_run(tmp_path: Path):
    assert pretrain_beside(_sweep(tmp_path, ["pretrained", "random"]))
    assert not pretrain_beside(_sweep(tmp_path, ["pretrained"]))  # nothing to overlap
    assert not pretrain_beside(_sweep(tmp_path, ["random"]))  # nothing needs it
    assert not pretrain_beside(_sweep(tmp_path, ["pretrained", "random"], pretrain=False))
    sweep = _sweep(tmp_path, ["pretrained", "random"])
    random = [k for k, t in sweep.trials.items() if t.init == "random"]
    rest = [k for k in sweep.trials if k not in random]
    sweep.plan = RunPlan(done=dict.fromkeys(random, "run"), resume={}, create=rest)
    assert not pretrain_beside(sweep)  # a resume whose random trials finished: as before


def test_trials_waiting_for_the_stage_are_queued_last(tmp_path: Path):
    sweep = _sweep(tmp_path, ["pretrained", "random"])
    keys = list(sweep.trials)
    assert [sweep.trials[k].init for k in keys][:2] == ["pretrained", "pretrained"]
    ordered = trial_order(sweep, keys, stage=object())  # type: ignore[arg-type]
    assert [sweep.trials[k].init for k in ordered] == ["random"] * 2 + ["pretrained"] * 2
    assert trial_order(sweep, keys, stage=None) == keys


def test_the_stage_takes_one_trial_slot_on_the_driver_node(tmp_path: Path):
    pytest.importorskip("ray")
    from sweeper.tune.pretrain_task import stage_bundle

    spec = _sweep(tmp_path, ["pretrained", "random"], cpu=2).spec
    node = {
        "NodeManagerAddress": "10.0.0.5",
        "Resources": {"CPU": 8.0, "node:10.0.0.5": 1.0, "node:__internal_head__": 1.0},
    }
    assert stage_bundle(spec, node) == {"CPU": 2.0, "node:10.0.0.5": 0.001}
    gpu_head = {**node, "Resources": {**node["Resources"], "GPU": 2.0}}
    assert stage_bundle(spec, gpu_head)["GPU"] == 1.0  # as the driver's pretraining had
    no_cpu = {**node, "Resources": {"node:10.0.0.5": 1.0}}  # a head started with 0 CPUs
    assert stage_bundle(spec, no_cpu) == {"CPU": 0.0, "node:10.0.0.5": 0.001}


def test_a_pretraining_recipe_that_cannot_run_is_refused_before_any_run(tmp_path: Path):
    """The stage now starts after the runs exist, so what `pretrain` would refuse is
    refused by preflight (exit 2, nothing created)."""
    from sweeper.data.errors import DataError
    from sweeper.engine.preflight import check_pretrain

    spec = _sweep(tmp_path, ["pretrained", "random"]).spec  # max_positions 32
    with pytest.raises(DataError, match=r"max_tokens_per_sample \(64\) exceeds .*\(32\)"):
        check_pretrain(spec)  # the default 64 tokens per sample do not fit
    fits = spec.model.pretrain.model_copy(update={"max_tokens_per_sample": 32})  # type: ignore[union-attr]
    check_pretrain(
        spec.model_copy(update={"model": spec.model.model_copy(update={"pretrain": fits})})
    )
    checkpoint = _sweep(tmp_path, ["pretrained", "random"], pretrain=False).spec
    check_pretrain(checkpoint)  # a given checkpoint is not pretrained: nothing to check
