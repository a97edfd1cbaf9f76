"""One seed per source: the spec's axis, the trials' seeds, keys, groups, names and tags,
the job's `seed_of`, what each trainer is given, and the evidence file's rules.

Known answers: `seed_source: [all]` leaves sweeps/demo.yaml's 12 keys as they were
recorded before sources existed; every one-source trial is a key of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest
from test_objective_axis import DEMO_KEYS
from test_summarize_stats import trial as counted

from sweeper import record_names
from sweeper.cli.main import main
from sweeper.record_names import SEED_ALL, SEED_SOURCES
from sweeper.spec.axes_block import SeedSource
from sweeper.spec.load import SpecError, load_spec, validate_mapping
from sweeper.summarize.compare import compare, variant_values
from sweeper.summarize.stats import group_stats
from sweeper.tracking.runs import flatten_params, trial_tags
from sweeper.trainers.base import TrialJob
from sweeper.trainers.seed_evidence import (
    SeedEvidence,
    data_order,
    evidence_tags,
    order_digest,
    read,
)
from sweeper.trial_keys import (
    Trial,
    expand,
    make_trial,
    recorded_seeds,
    without_seed_source,
)
from tests.support.specs import SWEEPS, minimal_spec

SOURCES = ["init", "data_order", "dropout"]
RECIPE = {"adam_betas": [0.9, 0.98], "adam_eps": 1e-6, "weight_decay": 0.1, "clip_norm": 0.0}
RECIPE |= {"lr": 1e-3, "warmup_ratio": 0.06, "dropout": 0.1, "attention_dropout": 0.1}


def _spec(tmp_path: Path, **grid):
    raw = minimal_spec()
    raw["grid"] = {"seed": [1, 2, 3], "init": ["random"], "framework": ["fairseq", "hf"], **grid}
    return validate_mapping(raw, "spec.yaml", base_dir=tmp_path)


def _problems(tmp_path: Path, **grid) -> str:
    with pytest.raises(SpecError) as exc:
        _spec(tmp_path, **grid)
    return "\n".join(f"{p.field}: {p.message}" for p in exc.value.problems)


# --- the spec ---------------------------------------------------------------------------


def test_the_sources_are_the_record_vocabulary():
    assert get_args(SeedSource) == (SEED_ALL, *SEED_SOURCES)


def test_all_is_the_default_and_held_seed_the_first_grid_seed(tmp_path):
    spec = _spec(tmp_path)
    assert spec.grid.seed_source == [SEED_ALL] and spec.grid.held_seed is None
    assert not spec.grid.one_source()
    assert _spec(tmp_path, seed=[4, 2], seed_source=["init"]).grid.held() == 4
    assert _spec(tmp_path, seed_source=["init"], held_seed=9).grid.held() == 9


def test_bad_sources_are_refused_with_the_field(tmp_path):
    assert "grid.seed_source.0" in _problems(tmp_path, seed_source=["weights"])
    assert "repeats init" in _problems(tmp_path, seed_source=["init", "dropout", "init"])
    assert "grid.seed_source" in _problems(tmp_path, seed_source=[])
    text = _problems(tmp_path, held_seed=5)
    assert "grid: " in text and "held_seed" in text and "[all]" in text


def test_one_source_with_a_search_is_refused_in_one_line(write_spec, capsys):
    raw = minimal_spec()
    raw["grid"] = {"seed": [2, 3], "seed_source": ["all", "dropout"]}
    raw["search"] = {"space": {"train.lr": {"type": "uniform", "low": 0, "high": 1}}}
    assert main(["validate", str(write_spec(raw))]) == 2
    err = capsys.readouterr().err
    assert "grid.seed_source other than [all] needs a grid without search:" in err
    raw["grid"]["seed_source"] = ["all"]
    assert main(["validate", str(write_spec(raw))]) == 0


# --- trials, keys, groups, names ----------------------------------------------------------


def test_all_keeps_the_demo_keys_as_recorded():
    trials, _ = expand(load_spec(SWEEPS / "demo.yaml", ["grid.seed_source=[all]"]))
    assert {t.key for t in trials} == DEMO_KEYS
    assert all(t.seed_source == SEED_ALL and t.held_seed is None for t in trials)
    assert "seed_source" not in flatten_params(trials[0].identity())


def test_every_one_source_trial_is_a_key_of_its_own(tmp_path):
    spec = _spec(tmp_path, seed_source=["all", *SOURCES])
    trials, _ = expand(spec)
    assert len(trials) == 4 * 3 * 2  # sources x seeds x frameworks: nothing deduplicated
    assert len({t.key for t in trials}) == len(trials)
    plain, _ = expand(_spec(tmp_path))
    assert {t.key for t in plain} <= {t.key for t in trials}  # the `all` block's keys
    held = [t for t in trials if t.seed == 1 and t.framework == "hf"]
    assert len(held) == 4 and {json.dumps(t.seeds) for t in held} == {
        json.dumps({"init": 1, "data_order": 1, "dropout": 1})
    }  # the same seeds, four trials: the determinism check


def test_a_source_sets_its_seed_and_holds_the_others(tmp_path):
    spec = _spec(tmp_path, seed_source=SOURCES, held_seed=7)
    by = {(t.seed_source, t.seed, t.framework): t for t in expand(spec)[0]}
    assert by[("init", 2, "hf")].seeds == {"init": 2, "data_order": 7, "dropout": 7}
    assert by[("data_order", 3, "fairseq")].seeds == {"init": 7, "data_order": 3, "dropout": 7}
    assert by[("dropout", 1, "hf")].seeds == {"init": 7, "data_order": 7, "dropout": 1}
    identity = by[("dropout", 1, "hf")].identity()
    assert identity["seed_source"] == "dropout" and identity["seeds"]["init"] == 7
    params = flatten_params(identity)
    assert (params["seed_source"], params["seeds.dropout"], params["seeds.init"]) == (
        "dropout",
        "1",
        "7",
    )
    other_held = {t.key for t in expand(_spec(tmp_path, seed_source=SOURCES, held_seed=8))[0]}
    assert not other_held & {t.key for t in by.values()}


def test_added_seeds_take_the_sources_and_keep_the_held_seed(tmp_path):
    spec = _spec(tmp_path, seed_source=["all", "data_order"])
    added, _ = expand(spec, seeds=[4, 5])
    assert {(t.seed_source, t.seed) for t in added} == {
        (s, n) for s in ("all", "data_order") for n in (4, 5)
    }
    assert {t.held_seed for t in added if t.seed_source == "data_order"} == {1}


def test_groups_and_names_say_the_source(tmp_path):
    spec = _spec(tmp_path, seed_source=["all", "data_order"], params={"train.lr": [1e-3]})
    by = {(t.seed_source, t.seed, t.framework): t for t in expand(spec)[0]}
    one, plain = by[("data_order", 2, "hf")], by[("all", 2, "hf")]
    assert one.group == "hf/random/full[seed_source=data_order,train.lr=0.001]"
    assert plain.group == "hf/random/full[train.lr=0.001]"
    assert one.name == "hf-random-full-lr0.001-data_order-s2"
    assert plain.name == "hf-random-full-lr0.001-s2"
    _, _, variant = one.group.partition("[")
    assert variant_values(variant.removesuffix("]")) == {
        "seed_source": "data_order",
        "train.lr": "0.001",
    }
    assert without_seed_source(one.group) == (plain.group, "data_order")
    assert without_seed_source(plain.group) == (plain.group, SEED_ALL)
    assert without_seed_source("fairseq/random/full[seed_source=init]") == (
        "fairseq/random/full",
        "init",
    )


def test_a_trial_refuses_a_held_seed_that_does_not_fit():
    base = dict(sweep="s", seed=1, init="random", framework="hf", method="full", train={})
    with pytest.raises(ValueError, match="held seed"):
        Trial(**base, lora=None, seed_source="init")
    with pytest.raises(ValueError, match="held seed"):
        Trial(**base, lora=None, held_seed=3)
    with pytest.raises(ValueError, match="seed source"):
        Trial(**base, lora=None, seed_source="weights", held_seed=3)


def test_comparisons_stay_within_a_source_block():
    groups = [
        f"{f}/random/full{variant}"
        for f in ("fairseq", "hf")
        for variant in ("", "[seed_source=init]", "[seed_source=dropout]")
    ]
    trials = [counted(g, s, 60.0 + i + s / 10) for i, g in enumerate(groups) for s in (1, 2, 3)]
    got = {(c.axis, c.within) for c in compare(group_stats(trials), trials)}
    assert got == {
        ("framework", "random/full"),
        ("framework", "random/full[seed_source=init]"),
        ("framework", "random/full[seed_source=dropout]"),
    }


# --- the record -------------------------------------------------------------------------


def test_runs_are_tagged_with_every_source_seed(tmp_path):
    spec = _spec(tmp_path, seed_source=["all", "init"], held_seed=5)
    by = {(t.seed_source, t.seed, t.framework): t for t in expand(spec)[0]}
    tags = trial_tags(by[("init", 2, "hf")])
    assert tags[record_names.TAG_SEED_SOURCE] == "init"
    assert [tags[record_names.TAG_SEED_OF[s]] for s in SEED_SOURCES] == ["2", "5", "5"]
    assert tags[record_names.TAG_SEED] == "2"
    assert recorded_seeds(tags) == ("init", {"init": 2, "data_order": 5, "dropout": 5})
    plain = trial_tags(by[("all", 3, "hf")])
    assert recorded_seeds(plain) == ("all", {"init": 3, "data_order": 3, "dropout": 3})


def test_a_run_recorded_before_sources_is_all_with_one_seed():
    assert recorded_seeds({record_names.TAG_SEED: "4"}) == (
        "all",
        {"init": 4, "data_order": 4, "dropout": 4},
    )
    assert recorded_seeds({}) is None


# --- the job and the trainers -----------------------------------------------------------


def _job(tmp_path: Path, **changes) -> TrialJob:
    fields = dict(
        framework="hf", seed=3, init="random", method="full",
        train={"batch_size": 8, "epochs": 1}, lora=None, arch={}, num_classes=2,
        num_train=16, data=str(tmp_path), init_checkpoint="init.pt", out_dir=str(tmp_path),
    )  # fmt: skip
    return TrialJob(**{**fields, **changes})


def test_a_job_saved_before_sources_gives_its_seed_to_each(tmp_path):
    old = {k: v for k, v in vars(_job(tmp_path)).items() if k != "seeds"}
    (tmp_path / "trial.json").write_text(json.dumps(old), encoding="utf-8")
    job = TrialJob.load(tmp_path / "trial.json")
    assert [job.seed_of(s) for s in SEED_SOURCES] == [3, 3, 3]
    held = _job(tmp_path, seeds={"init": 1, "data_order": 3, "dropout": 1})
    held.save(tmp_path / "held.json")
    again = TrialJob.load(tmp_path / "held.json")
    assert [again.seed_of(s) for s in SEED_SOURCES] == [1, 3, 1]
    with pytest.raises(ValueError, match="unknown seed source"):
        again.seed_of("weights")


def test_fairseq_gets_the_data_order_seed_as_its_seed(tmp_path):
    from sweeper.trainers.fairseq.fairseq_trainer import train_args

    job = _job(
        tmp_path,
        framework="fairseq",
        arch={"layers": 1, "embed_dim": 16, "ffn_dim": 16, "heads": 2, "max_positions": 32},
        train={**RECIPE, "batch_size": 8, "epochs": 1},
        seeds={"init": 1, "data_order": 7, "dropout": 2},
    )
    args = train_args(job)
    assert args[args.index("--seed") + 1] == "7"


def test_hf_gets_dropout_as_seed_and_data_order_as_data_seed(tmp_path):
    from sweeper.trainers.hf.hf_seeds import seed_arguments

    job = _job(tmp_path, seeds={"init": 1, "data_order": 7, "dropout": 2})
    assert seed_arguments(job) == {"seed": 2, "data_seed": 7}
    assert seed_arguments(_job(tmp_path)) == {"seed": 3, "data_seed": 3}


# --- the evidence file ------------------------------------------------------------------


def test_evidence_records_start_weights_and_whole_epochs(tmp_path):
    import torch

    seeds = {"init": 1, "data_order": 2, "dropout": 1}
    evidence = SeedEvidence(tmp_path, seeds, examples=4)
    state = {"b": torch.zeros(2), "a": torch.arange(3, dtype=torch.float32)}
    evidence.started(state)
    evidence.epoch(1, [3, 0, 2, 1])
    evidence.epoch(2, [1, 2])  # resumed part way: no digest
    record = read(tmp_path)
    assert record is not None and record["seeds"] == seeds
    assert record["data_order"]["1"] == {"examples": 4, "sha256": order_digest([3, 0, 2, 1])}
    assert record["data_order"]["2"] == {"partial": 2}
    assert data_order(record) is None
    tags = evidence_tags(tmp_path)
    assert set(tags) == {record_names.TAG_START_WEIGHTS}
    same = {"a": torch.arange(3, dtype=torch.float32), "b": torch.zeros(2)}  # other order
    other = {**same, "b": torch.tensor([0.0, 1e-7])}
    for name, weights, equal in (("same", same, True), ("other", other, False)):
        (tmp_path / name).mkdir()
        SeedEvidence(tmp_path / name, seeds, 4).started(weights)
        digest = read(tmp_path / name)["start_weights"]  # type: ignore[index]
        assert (digest == record["start_weights"]) is equal


def test_a_resume_keeps_what_the_first_process_measured(tmp_path):
    import torch

    seeds = {"init": 1, "data_order": 2, "dropout": 1}
    first = SeedEvidence(tmp_path, seeds, examples=3)
    first.started({"w": torch.ones(1)})
    first.epoch(1, [2, 0, 1])
    start = first.record["start_weights"]
    resumed = SeedEvidence(tmp_path, seeds, examples=3)  # no `started`: it resumed
    resumed.epoch(2, [0, 1, 2])
    record = read(tmp_path)
    assert record is not None and start is not None and record["start_weights"] == start
    assert set(record["data_order"]) == {"1", "2"}
    tags = evidence_tags(tmp_path)
    assert tags[record_names.TAG_DATA_ORDER] == data_order(record)[:16]
    assert len(tags[record_names.TAG_START_WEIGHTS]) == 16
    other = SeedEvidence(tmp_path, {**seeds, "dropout": 5}, examples=3)  # another trial's
    assert other.record["start_weights"] is None and other.record["data_order"] == {}


def test_no_evidence_means_no_tags(tmp_path):
    assert read(tmp_path) is None and evidence_tags(tmp_path) == {}
    (tmp_path / record_names.SEEDS_FILE).write_text("{not json", encoding="utf-8")
    assert read(tmp_path) is None


def test_make_trial_resolves_the_held_seed_from_the_grid(tmp_path):
    spec = _spec(tmp_path, seed=[6, 2], seed_source=["all", "dropout"])
    trial = make_trial(
        spec, seed=2, init="random", framework="hf", method="full", seed_source="dropout"
    )
    assert trial.held_seed == 6 and trial.seeds == {"init": 6, "data_order": 6, "dropout": 2}
    assert make_trial(spec, seed=2, init="random", framework="hf", method="full").held_seed is None
