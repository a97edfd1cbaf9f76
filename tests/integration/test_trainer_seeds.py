"""One seed per source, held in real trainers: what each fairseq and HF trial started
from and was fed, as its child measured it (`seeds.json`, trainers/seed_evidence.py).

Per framework, on the tiny generated corpus (80 training sentences, 2 epochs, random
init): the `all` trials of seeds 1 and 2, and seed 2 of each one-source block with the
others held at 1, plus the data-order block's seed 1 (every seed 1: the `all` trial's
computation). Varying only the data order keeps the starting weights (and the init
file) and changes the order; varying only the init keeps the order and changes the
weights; varying only dropout keeps both and still changes the results; `all` changes
both. Known answers: the starting weights are the init checkpoint's as the framework
loads it, and HF's order is accelerate's seedable sampler drawn with `data_seed + epoch`.
Then one `sweeper run` through Ray and MLflow: the runs carry the sources' tags and the
evidence digests, and the summary compares the frameworks within the block.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sweeper import record_names
from sweeper.spec.load import load_spec
from sweeper.trainers.base import TrialJob
from sweeper.trainers.events import MetricEvent
from sweeper.trainers.seed_evidence import order_digest, read, weights_digest
from sweeper.trainers.trial_pipeline import prepare_inputs, run_trial, trial_dir
from sweeper.trial_keys import Trial, expand
from tests.support.sweeps import TRAIN, new_sweep, run_sweeper, runs_by_role

EPOCHS = 2
RUNS = (("all", 1), ("all", 2), ("init", 2), ("data_order", 1), ("data_order", 2), ("dropout", 2))


class Ran:
    """One trial as it ran: its job, its measured seeds, its events."""

    def __init__(self, trial: Trial, out: Path, events: list[MetricEvent]):
        self.trial = trial
        self.job = TrialJob.load(out / record_names.TRIAL_CONFIG_FILE)
        evidence = read(out)
        assert evidence is not None, f"{trial.name} wrote no {record_names.SEEDS_FILE}"
        self.evidence = evidence
        self.events = events

    @property
    def start(self) -> str:
        return str(self.evidence["start_weights"])

    @property
    def order(self) -> list[str]:
        epochs = self.evidence["data_order"]
        assert sorted(epochs, key=int) == [str(e) for e in range(1, EPOCHS + 1)]
        assert all(epochs[e]["examples"] == TRAIN for e in epochs), epochs
        return [epochs[e]["sha256"] for e in sorted(epochs, key=int)]

    def valid_losses(self) -> list[float | None]:
        return [e.loss for e in self.events if e.split == "valid"]

    def measured(self) -> list[tuple[Any, ...]]:
        """Every event without its clock."""
        return [(e.split, e.step, e.loss, e.accuracy, e.lr) for e in self.events]


@pytest.fixture(scope="module")
def trials_of(tmp_path_factory) -> Callable[[str], dict[tuple[str, int], Ran]]:
    """framework -> its trials as they ran (`RUNS`), each framework's run once."""
    found: dict[str, dict[tuple[str, int], Ran]] = {}

    def run(framework: str) -> dict[tuple[str, int], Ran]:
        if framework not in found:
            found[framework] = _run_all(framework, tmp_path_factory)
        return found[framework]

    return run


def _run_all(framework: str, tmp_path_factory: Any) -> dict[tuple[str, int], Ran]:
    tmp = tmp_path_factory.mktemp(f"seeds_{framework}")
    path, _ = new_sweep(
        tmp,
        tmp_path_factory,
        f"seeds-{framework}",
        train={"epochs": EPOCHS},
        grid={
            "seed": [1, 2],
            "init": ["random"],
            "framework": [framework],
            "seed_source": ["all", "init", "data_order", "dropout"],
        },
    )
    spec = load_spec(path)
    trials = {(t.seed_source, t.seed): t for t in expand(spec)[0]}
    inputs = prepare_inputs(spec, log=lambda _: None, need_pretrained=False)
    found = {}
    for wanted in RUNS:
        trial = trials[wanted]
        out = trial_dir(spec, trial)
        result = run_trial(spec, trial, out, inputs=inputs, log=lambda _: None)
        found[wanted] = Ran(trial, out, result.events)
    return found


@pytest.fixture(params=["fairseq", "hf"])
def ran(request, trials_of) -> dict[tuple[str, int], Ran]:
    return trials_of(request.param)


def test_varying_the_data_order_keeps_the_starting_weights(ran):
    base, varied = ran[("all", 1)], ran[("data_order", 2)]
    assert varied.job.seeds == {"init": 1, "data_order": 2, "dropout": 1}
    assert varied.job.init_checkpoint == base.job.init_checkpoint  # one init file
    assert varied.start == base.start
    assert varied.order != base.order
    assert all(a != b for a, b in zip(varied.order, base.order, strict=True))


def test_varying_the_init_keeps_the_data_order(ran):
    base, varied = ran[("all", 1)], ran[("init", 2)]
    assert varied.job.init_checkpoint != base.job.init_checkpoint
    assert varied.job.init_checkpoint == ran[("all", 2)].job.init_checkpoint
    assert varied.start != base.start and varied.start == ran[("all", 2)].start
    assert varied.order == base.order


def test_varying_dropout_keeps_weights_and_order_and_changes_the_results(ran):
    base, varied = ran[("all", 1)], ran[("dropout", 2)]
    assert (varied.start, varied.order) == (base.start, base.order)
    assert varied.valid_losses() != base.valid_losses()


def test_all_varies_both(ran):
    one, two = ran[("all", 1)], ran[("all", 2)]
    assert one.start != two.start and one.order != two.order


def test_a_held_trial_of_the_held_seed_computes_the_all_trial(ran):
    """Its seeds are all 1: the patched seeding (fairseq's dropout reseed, HF's data_seed)
    is then fairseq's and transformers' own, event for event."""
    base, held = ran[("all", 1)], ran[("data_order", 1)]
    assert held.trial.key != base.trial.key
    assert (held.start, held.order) == (base.start, base.order)
    assert held.measured() == base.measured()


def test_the_start_is_the_init_file_as_the_framework_loads_it(ran):
    from sweeper.models.init import fairseq_init_model, hf_init_model

    trial = ran[("data_order", 2)]
    load = fairseq_init_model if trial.job.framework == "fairseq" else hf_init_model
    model = load(Path(trial.job.init_checkpoint))
    assert weights_digest(model.state_dict()) == trial.start


def test_hf_order_is_the_seedable_sampler_of_data_seed_plus_epoch(trials_of):
    import torch

    trial = trials_of("hf")[("data_order", 2)]
    expected = [
        order_digest(torch.randperm(TRAIN, generator=torch.Generator().manual_seed(2 + e)).tolist())
        for e in range(EPOCHS)
    ]
    assert trial.order == expected


def test_a_sweep_records_the_sources_and_what_the_trainers_measured(tmp_path, tmp_path_factory):
    """Through Ray and MLflow: the data-order block of both frameworks, seeds 1 and 2."""
    spec, out = new_sweep(
        tmp_path,
        tmp_path_factory,
        "seeds-run",
        train={"epochs": 1},
        grid={
            "seed": [1, 2],
            "init": ["random"],
            "framework": ["fairseq", "hf"],
            "seed_source": ["data_order"],
            "held_seed": 3,
        },
    )
    done = run_sweeper("run", spec)
    assert done.returncode == 0, done.stderr[-3000:]
    _, runs = runs_by_role(out, "seeds-run")
    assert len(runs) == 4
    by = {
        (r.data.tags[record_names.TAG_FRAMEWORK], r.data.tags[record_names.TAG_SEED]): r
        for r in runs
    }
    for framework in ("fairseq", "hf"):
        one, two = (by[(framework, seed)].data.tags for seed in ("1", "2"))
        assert one[record_names.TAG_GROUP] == f"{framework}/random/full[seed_source=data_order]"
        for tags, seed in ((one, "1"), (two, "2")):
            assert tags[record_names.TAG_SEED_SOURCE] == "data_order"
            assert tags[record_names.TAG_SEED_OF["data_order"]] == seed
            assert tags[record_names.TAG_SEED_OF["init"]] == "3"
            assert tags[record_names.TAG_SEED_OF["dropout"]] == "3"
        assert one[record_names.TAG_START_WEIGHTS] == two[record_names.TAG_START_WEIGHTS]
        assert one[record_names.TAG_DATA_ORDER] != two[record_names.TAG_DATA_ORDER]
    summary = run_sweeper("summarize", spec, "--format", "json", "--no-log")
    assert summary.returncode == 0, summary.stderr[-3000:]
    compared = json.loads(summary.stdout)["comparisons"]
    assert [(c["axis"], c["within"]) for c in compared] == [
        ("framework", "random/full[seed_source=data_order]")
    ]
