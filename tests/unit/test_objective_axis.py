"""The pretraining objective as a grid axis: its keys, its inputs, its comparisons.

Known answers: the default objective (`masked_lm`) leaves every trial key, the masked-LM
cache key and the inputs fingerprint as the code before the field made them (the
hashes below were computed by that code); `random` trials ignore the objective; a
pretrained trial starts from its own objective's checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_summarize_stats import trial as counted

from sweeper import backends
from sweeper.spec.load import SpecError, load_spec
from sweeper.spec.model_block import ArchConfig, PretrainConfig
from sweeper.summarize.compare import compare
from sweeper.summarize.stats import group_stats
from sweeper.tracking.inputs import inputs_fingerprint
from sweeper.tracking.runs import flatten_params
from sweeper.trainers.trial_pipeline import SweepInputs
from sweeper.trial_keys import expand, make_trial, objectives
from tests.support.specs import SWEEPS

AXIS = "model.pretrain.objective"
DEMO_KEYS = {  # sweeps/demo.yaml's 12 keys, as recorded before the objective existed
    "be7292fda1dc8f40", "0d9005ee37872e80", "e89ab6a0b0f2923d", "c53a6dad29e17f67",
    "2391852c906c8077", "25640f89ef689779", "1ae67eb404cdc971", "ab402156ea7aede3",
    "dfed6c5e084a1b4d", "1aa591f5ccc794bc", "81b78033b4905832", "567a4973e64ffc1c",
}  # fmt: skip


def _objective_spec(overrides: list[str] | None = None):
    return load_spec(SWEEPS / "objective.yaml", overrides or [])


def test_the_default_objective_leaves_the_demo_keys_as_they_were():
    trials, _ = expand(load_spec(SWEEPS / "demo.yaml"))
    assert {t.key for t in trials} == DEMO_KEYS
    pretrained = [t for t in trials if t.init == "pretrained"]
    assert {t.objective for t in pretrained} == {"masked_lm"}
    assert {t.objective for t in trials if t.init == "random"} == {None}
    assert flatten_params(pretrained[0].identity())[AXIS] == "masked_lm"  # the record shows it


def test_the_axis_adds_causal_trials_and_keeps_the_masked_and_random_keys():
    axis, _ = expand(_objective_spec())
    plain, _ = expand(_objective_spec(["grid.params={}"]))
    assert len(axis) == 18 and len(plain) == 12
    by_objective = {
        o: {t.key for t in axis if t.objective == o} for o in ("masked_lm", "causal_lm")
    }
    random = {t.key for t in axis if t.init == "random"}
    assert len(by_objective["causal_lm"]) == 6 and len(random) == 6
    assert by_objective["masked_lm"] | random == {t.key for t in plain}
    assert {t.group for t in axis if t.init == "random"} == {
        "fairseq/random/full",
        "hf/random/full",
    }
    causal = next(t for t in axis if t.objective == "causal_lm")
    assert flatten_params(causal.identity())[AXIS] == "causal_lm"
    assert causal.group == "fairseq/pretrained/full[model.pretrain.objective=causal_lm]"


def test_a_random_trial_ignores_the_objective():
    spec = _objective_spec()
    made = [
        make_trial(spec, seed=1, init="random", framework="hf", method="full", varied={AXIS: o})
        for o in ("masked_lm", "causal_lm")
    ]
    assert made[0] == made[1] and made[0].objective is None and made[0].varied == {}


def test_the_objective_field_alone_keys_causal_trials():
    causal, _ = expand(_objective_spec(["grid.params={}", "model.pretrain.objective=causal_lm"]))
    masked, _ = expand(_objective_spec(["grid.params={}"]))
    pretrained = {t.key for t in causal if t.init == "pretrained"}
    assert pretrained.isdisjoint(t.key for t in masked)
    assert objectives(_objective_spec()) == ["masked_lm", "causal_lm"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.pretrain=null", "model.checkpoint=m.pt"], "needs `model.pretrain`"),
        ([f"grid.params={{{AXIS}: [masked_lm, electra]}}"], "masked_lm"),
        (["search={space: {model.pretrain.objective: {type: choice, values: [causal_lm]}}}"],
         "grid axis only"),
        (["grid.params={model.pretrain.objectiv: [causal_lm]}"], f"did you mean '{AXIS}'"),
    ],
)  # fmt: skip
def test_objectives_that_cannot_run_are_refused(overrides, message):
    with pytest.raises(SpecError) as caught:
        _objective_spec(overrides)
    assert message in str(caught.value)


def test_a_task_with_one_pretraining_offers_no_objective():
    assert set(backends.task("classification").pretrain) == {"masked_lm", "causal_lm"}
    assert backends.task("causal_lm").pretrain == {}
    with pytest.raises(SpecError, match="not an objective of task causal_lm"):
        load_spec(SWEEPS / "demo-llm.yaml", ["model.pretrain.objective=causal_lm"])


def test_a_pretrained_trial_starts_from_its_objectives_checkpoint(tmp_path: Path):
    spec = _objective_spec()
    paths = {o: tmp_path / o / "model.pt" for o in ("masked_lm", "causal_lm")}
    inputs = SweepInputs({}, tmp_path, 10, 2, 1, dict(paths))
    for objective, path in paths.items():
        trial = make_trial(
            spec, seed=1, init="pretrained", framework="fairseq", method="full",
            varied={AXIS: objective},
        )  # fmt: skip
        assert inputs.pretrained_for(trial) == path
    missing = SweepInputs({}, tmp_path, 10, 2, 1, {"masked_lm": paths["masked_lm"]})
    with pytest.raises(ValueError, match="causal_lm checkpoint"):
        missing.pretrained_for(trial)


def test_the_masked_lm_cache_key_and_fingerprint_are_unchanged(tmp_path: Path):
    from sweeper.trainers.fairseq.fairseq_pretrain import cache_key
    from sweeper.trainers.hf.roberta_causal_pretrain import causal_cache_key

    (tmp_path / "train.bin").write_bytes(b"abc\x00\x01")
    arch = ArchConfig(layers=2, embed_dim=16, ffn_dim=32, heads=2, max_positions=32)
    config = PretrainConfig(steps=10)
    assert cache_key(tmp_path, arch, config) == "e27535de5e03944b"
    assert causal_cache_key(tmp_path, arch, config) == "causal_lm-0abe4009c10b8d38"
    causal = config.model_copy(update={"objective": "causal_lm"})
    assert cache_key(tmp_path, arch, causal) == "e27535de5e03944b"  # the stage, not the field
    for spec in (load_spec(SWEEPS / "demo.yaml"), _objective_spec()):
        assert inputs_fingerprint(spec)["pretrained"] == "bbac62142b7da36f"


def test_objectives_are_compared_within_each_framework_and_each_with_random():
    groups = [
        f"{f}/pretrained/full[{AXIS}={o}]"
        for f in ("fairseq", "hf")
        for o in ("masked_lm", "causal_lm")
    ] + ["fairseq/random/full", "hf/random/full"]
    trials = [counted(g, s, 60.0 + i + s / 10) for i, g in enumerate(groups) for s in (1, 2, 3)]
    got = {(c.axis, c.kind, c.within) for c in compare(group_stats(trials), trials)}
    masked, causal = f"{AXIS}=masked_lm", f"{AXIS}=causal_lm"
    assert {
        (AXIS, f"{masked} - {causal}", "fairseq/pretrained/full"),
        (AXIS, f"{masked} - {causal}", "hf/pretrained/full"),
        ("init", f"pretrained[{causal}] - random", "fairseq/full"),
        ("init", f"pretrained[{masked}] - random", "hf/full"),
        ("framework", "fairseq - hf", f"pretrained/full[{causal}]"),
        ("framework", "fairseq - hf", "random/full"),
    } <= got
    assert len(got) == 2 + 4 + 3  # objective per framework, init per group, framework per row
