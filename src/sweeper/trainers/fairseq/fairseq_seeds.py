"""Which seed drives what in the fairseq child, and what it records of it (the trial
folder's `seeds.json`, `sweeper.trainers.seed_evidence`).

As fairseq 0.12.3 runs a `sentence_prediction` trial (read in its sources):

* **data order**: `--seed` (`common.seed`). `SentencePredictionTask.load_dataset` orders
  each split by a permutation drawn under `numpy_seed(cfg.seed)` (the task's seed is
  `II("common.seed")`), and `Trainer.get_train_iterator` hands the epoch batch iterator
  `seed=common.seed`, which shuffles epoch e's batches under `numpy_seed(seed + e)`.
  The trainer passes the job's `data_order` seed as `--seed`
  (`fairseq_trainer.train_args`).
* **dropout**: fairseq reseeds torch before every update with `common.seed +
  num_updates` (`Trainer._set_seed`, so that a resume continues the same stream), which
  would tie the masks to the data order. `FairseqSeeds` reseeds with the job's `dropout`
  seed + num_updates instead (`fairseq_main`, fix 11): the same function of the update
  number, another seed, and exactly fairseq's own stream when the two seeds are equal.
* **init**: `fairseq_cli.train.main` seeds torch with `--seed` and builds the model (a
  random encoder and the task's classification head), then `--finetune-from-model`
  loads every tensor from the init checkpoint (strictly; the head too, which has the
  task's name and classes), so nothing of that draw survives: two trials of one init
  seed start from the same weights whatever their data-order seed (the `start_weights`
  digest; tests/integration/test_trainer_seeds.py).

fairseq-train takes no argument for the dropout seed (its parser refuses unknown flags),
so the child reads the job: `trial.json` beside `--save-dir`, which the runner writes
before it starts the trainer. A save dir without one (the pretraining stage) keeps
fairseq's own seeding.

What it records: the state dict the first update of a fresh run starts from (hooked in
`Trainer.train_step` at update 0: after `load_checkpoint`) and, per epoch, the ids
(`sample["id"]`: the example's index in the binarized train split, the line HF's
dataset has it at) of every batch `train_step` was given, written when the epoch ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sweeper import record_names
from sweeper.trainers.base import TrialJob
from sweeper.trainers.seed_evidence import SeedEvidence


class FairseqSeeds:
    """The dropout seed and the evidence hooks of one fairseq-train trial."""

    def __init__(self, job: TrialJob):
        self.dropout = job.seed_of(record_names.SEED_DROPOUT)
        seeds = {source: job.seed_of(source) for source in record_names.SEED_SOURCES}
        self.evidence = SeedEvidence(Path(job.out_dir), seeds, job.num_train)
        self.fed: list[int] = []
        """The ids of the current epoch's batches, in the order they were fed."""
        self.first = True
        """Before this process's first update: a fresh run records its weights there."""

    @classmethod
    def of_save_dir(cls, save_dir: Path | None) -> FairseqSeeds | None:
        """For a trial's save dir (its folder holds `trial.json`), else None."""
        if save_dir is None:
            return None
        config = Path(save_dir).parent / record_names.TRIAL_CONFIG_FILE
        return cls(TrialJob.load(config)) if config.is_file() else None

    def install(self) -> FairseqSeeds:
        """Replace `Trainer._set_seed` (dropout), wrap `Trainer.train_step` (what each
        update is fed) and fairseq_cli's per-epoch `train` (epoch boundaries)."""
        from fairseq import utils
        from fairseq.trainer import Trainer
        from fairseq_cli import train

        step, epoch = Trainer.train_step, train.train
        dropout = self.dropout

        def _set_seed(trainer: Any) -> None:
            utils.set_torch_seed(dropout + trainer.get_num_updates())

        def train_step(trainer: Any, samples: Any, raise_oom: bool = False) -> Any:
            if raise_oom:  # fairseq's retry after an OOM: the same batch again
                return step(trainer, samples, raise_oom)
            if self.first and trainer.get_num_updates() == 0:
                self.evidence.started(trainer.model.state_dict())
            self.first = False
            self.fed.extend(_ids(samples))
            return step(trainer, samples, raise_oom)

        def train_epoch(cfg, trainer, task, epoch_itr):  # type: ignore[no-untyped-def]
            self.fed = []
            try:
                return epoch(cfg, trainer, task, epoch_itr)
            finally:  # `epoch_itr.epoch`: the one it iterated (1-based), set as it began
                if self.fed:  # an epoch stopped part way (a notice) is noted as partial
                    self.evidence.epoch(epoch_itr.epoch, self.fed)

        Trainer._set_seed = _set_seed
        Trainer.train_step = train_step
        train.train = train_epoch
        return self


def _ids(samples: Any) -> list[int]:
    """The example ids of one update's samples (a list of batches; an empty or dummy
    batch has none)."""
    ids: list[int] = []
    for sample in samples or ():
        if isinstance(sample, dict) and "id" in sample:
            ids.extend(int(i) for i in sample["id"].tolist())
    return ids
