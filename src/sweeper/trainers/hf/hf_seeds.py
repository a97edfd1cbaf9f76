"""Which seed drives what in the HF children (`hf_main`, `lm_main`), and what they record
of it (`sweeper.trainers.seed_evidence`: the trial folder's `seeds.json`).

As transformers 5.23 and accelerate run a trial (read in their sources):

* **data order**: `TrainingArguments.data_seed`, the job's `data_order` seed.
  `Trainer._get_train_sampler` gives a `RandomSampler` without a generator, and
  `accelerator.prepare` replaces it by accelerate's `SeedableRandomSampler`
  (`use_seedable_sampler`, on by default), which draws epoch e's permutation from its own
  generator seeded with `data_seed + e` (unset: the torch seed at that moment, which
  `Trainer.__init__` has just set to `seed`, so setting it to `seed` changes nothing).
  Its own generator: dropout draws do not move it, nor it them.
* **dropout**: `TrainingArguments.seed`, the job's `dropout` seed: `Trainer.__init__`
  calls `set_seed(seed)` after the model is built, and every dropout mask is drawn
  from that global stream (a resume restores it from the checkpoint's `rng_state.pth`).
* **init**: the child draws no weights of its own. The init checkpoint holds them (random
  init and classifier head, drawn under the init seed by `sweeper.models.init`, or a
  causal LM's decoder folder); `RobertaForSequenceClassification(config)`'s draw is
  overwritten by the strict load; LoRA's adapters are drawn right after
  `set_seed(init seed)` (`hf_main.build_model`, `lm_main.build_model`).

`SeedWatch` measures it: the weights `Trainer.train` starts from (`on_train_begin` at
step 0: after the checkpoint is loaded and LoRA wrapped, before the first update) and,
through `RecordedOrder`, the ids of the training examples each epoch fetched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch.utils.data import Dataset
from transformers import TrainerCallback

from sweeper.record_names import SEED_DATA_ORDER, SEED_DROPOUT, SEED_SOURCES
from sweeper.trainers.base import TrialJob
from sweeper.trainers.seed_evidence import SeedEvidence


def seed_arguments(job: TrialJob) -> dict[str, int]:
    """The `TrainingArguments` fields of the job's seeds (see the module docstring)."""
    return {"seed": job.seed_of(SEED_DROPOUT), "data_seed": job.seed_of(SEED_DATA_ORDER)}


class RecordedOrder(Dataset):
    """A training split that notes the index of every example fetched from it: with
    `dataloader_num_workers=0` the fetches are the sampler's order, in the trial
    process."""

    def __init__(self, dataset: Any):
        self.dataset = dataset
        self.fetched: list[int] = []

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        self.fetched.append(int(index))
        return self.dataset[index]


class SeedWatch(TrainerCallback):
    """Writes `seeds.json`: the starting weights at step 0, each epoch's order at its end."""

    def __init__(self, job: TrialJob, train: RecordedOrder):
        seeds = {source: job.seed_of(source) for source in SEED_SOURCES}
        self.evidence = SeedEvidence(Path(job.out_dir), seeds, len(train))
        self.train = train

    def on_train_begin(self, args, state, control, model=None, **kwargs):  # type: ignore[override]
        if state.global_step == 0 and model is not None:
            self.evidence.started(model.state_dict())

    def on_epoch_begin(self, args, state, control, **kwargs):  # type: ignore[override]
        self.train.fetched.clear()

    def on_epoch_end(self, args, state, control, **kwargs):  # type: ignore[override]
        self.evidence.epoch(round(float(state.epoch or 0)), list(self.train.fetched))


def watch(job: TrialJob, train: Any) -> tuple[RecordedOrder, SeedWatch]:
    """The training split to hand the `Trainer`, and the callback that records it."""
    recorded = RecordedOrder(train)
    return recorded, SeedWatch(job, recorded)
