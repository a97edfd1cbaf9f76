"""Trial keys: one identity per trial, stable across paths, distinct across configs."""

from __future__ import annotations

from sweeper.spec.load import load_spec
from sweeper.trial_keys import expand, make_trial
from tests.support.specs import minimal_spec


def _spec(write_spec, overrides=(), name="spec.yaml"):
    return load_spec(write_spec(minimal_spec(), name), list(overrides))


def test_grid_expands_to_the_product(write_spec):
    trials, skipped = expand(_spec(write_spec))
    assert len(trials) == 3 * 2 * 2 and not skipped
    assert len({t.key for t in trials}) == 12
    assert {t.group for t in trials} == {
        f"{f}/{i}/full" for f in ("fairseq", "hf") for i in ("pretrained", "random")
    }


def test_key_ignores_paths_and_scheduling(write_spec):
    a = expand(_spec(write_spec))[0]
    b = expand(
        _spec(
            write_spec,
            ["output_dir=/elsewhere", "retries=5", "max_concurrent=1", "resources.cpu=4"],
            name="other.yaml",
        )
    )[0]
    assert [t.key for t in a] == [t.key for t in b]


def test_key_changes_with_recipe_and_sweep_name(write_spec):
    base = {t.key for t in expand(_spec(write_spec))[0]}
    assert base.isdisjoint(t.key for t in expand(_spec(write_spec, ["train.lr=0.001"]))[0])
    assert base.isdisjoint(t.key for t in expand(_spec(write_spec, ["name=other"]))[0])


def test_lora_on_fairseq_is_skipped_with_a_reason(write_spec):
    trials, skipped = expand(_spec(write_spec, ["grid.method=[full, lora]"]))
    assert len(trials) == 3 * 2 * 3  # fairseq/full, hf/full, hf/lora
    assert len(skipped) == 1 and "HF" in skipped[0].reason


def test_lora_values_do_not_duplicate_full_trials(write_spec):
    spec = _spec(
        write_spec,
        [
            "grid.method=[full, lora]",
            "grid.framework=[hf]",
            "grid.params={lora.r: [8, 16]}",
            "grid.seed=[1]",
        ],
    )
    trials, _ = expand(spec)
    groups = sorted(t.group for t in trials)
    assert groups == [
        "hf/pretrained/full",
        "hf/pretrained/lora[lora.r=16]",
        "hf/pretrained/lora[lora.r=8]",
        "hf/random/full",
        "hf/random/lora[lora.r=16]",
        "hf/random/lora[lora.r=8]",
    ]


def test_grid_params_are_validated_like_the_yaml(write_spec):
    spec = _spec(write_spec)
    try:
        make_trial(
            spec, seed=1, init="random", framework="hf", method="full", varied={"train.epochs": 0}
        )
    except ValueError as exc:
        assert "epochs" in str(exc)
    else:
        raise AssertionError("epochs=0 from the grid was accepted")


def test_fp32_keeps_the_keys_trials_had_before_precision_existed(write_spec):
    """Keys recorded before `train.precision` hashed a recipe without it; an fp32 trial
    must still find its run (resume, summarize), so fp32 stays out of the key."""
    import hashlib
    import json

    for trial in expand(_spec(write_spec))[0]:
        assert trial.train["precision"] == "fp32"
        old = trial.identity()
        old["train"] = {k: v for k, v in old["train"].items() if k != "precision"}
        canonical = json.dumps(old, sort_keys=True, separators=(",", ":"))
        assert trial.key == hashlib.sha256(canonical.encode()).hexdigest()[:16]


def test_precision_is_part_of_the_key_and_the_params(write_spec):
    from sweeper.tracking.runs import flatten_params

    fp32 = expand(_spec(write_spec))[0]
    bf16 = expand(_spec(write_spec, ["train.precision=bf16"]))[0]
    assert {t.key for t in fp32}.isdisjoint(t.key for t in bf16)
    assert flatten_params(fp32[0].identity())["train.precision"] == "fp32"
    assert flatten_params(bf16[0].identity())["train.precision"] == "bf16"
    axis = expand(_spec(write_spec, ["grid.params={train.precision: [fp32, bf16]}"]))[0]
    assert len({t.key for t in axis}) == 24 and {t.key for t in fp32} < {t.key for t in axis}
