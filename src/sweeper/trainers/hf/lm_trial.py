"""The causal-LM backend (`task: causal_lm` on hf): its inputs, trial jobs and trainer.

Inputs: the prompt/answer data (`sweeper.data.lm_task`, the `SweepInputs.data` key
`lm`) and the `pretrained` decoder, trained by `sweeper.trainers.hf.lm_pretrain` or
named by `model.checkpoint` (a local HF causal-LM folder). A trial's starting weights
are that folder, or for `random` the seed's freshly drawn `model.arch` decoder
(`sweeper.models.llama.random_init`, under the trial's init seed), so the trials of
one init seed share their starting point whatever their method. The job says what
picks the best checkpoint (`extra["select"]`, the spec's `select:`); `LMTrainer` runs
`lm_main` as its child.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sweeper.backends import Backend
from sweeper.record_names import SEED_INIT
from sweeper.spec.schema import SweepSpec
from sweeper.trainers.base import TrialJob
from sweeper.trainers.hf.hf_trainer import HFTrainer
from sweeper.trainers.predictions import Measured
from sweeper.trainers.trial_pipeline import SweepInputs
from sweeper.trial_keys import Trial

Log = Callable[[str], None]


def prepare_inputs(
    spec: SweepSpec, log: Log = print, need_pretrained: bool = True, force: bool = False
) -> SweepInputs:
    """The prepared data and, when asked, the pretrained decoder's folder. `force` does
    not apply: the prompt/answer ids are cached by content."""
    from sweeper.data.lm_task import prepare_lm

    data = prepare_lm(spec, log)
    pretrained: dict[str | None, Path] = {}
    if need_pretrained and "pretrained" in spec.grid.init:
        if spec.model.checkpoint is not None:
            pretrained[None] = spec.model.checkpoint
        else:
            from sweeper.trainers.hf.lm_pretrain import pretrain_lm

            pretrained[None] = pretrain_lm(spec, data, log)
    return SweepInputs(
        data={"lm": data.dir},
        root=data.dir.parent,
        vocab_size=data.vocab_size,
        num_classes=0,
        num_train=data.num_train,
        pretrained=pretrained,
    )


def build_job(
    backend: Backend,
    spec: SweepSpec,
    trial: Trial,
    inputs: SweepInputs,
    out_dir: Path,
    threads: int,
    device: str,
) -> TrialJob:
    """The trial's job, its starting folder written if it is a new random one."""
    from sweeper.models.llama import random_init

    arch = spec.model.arch.model_copy(update={"vocab_size": inputs.vocab_size})
    arch_fields = arch.model_dump(mode="json")
    if trial.init == "pretrained":
        init = inputs.pretrained_for(trial)
    else:
        seed = trial.seeds[SEED_INIT]  # trials that hold the init seed share the folder
        init = random_init(arch_fields, inputs.vocab_size, seed, spec.output_dir / "init")
    select = spec.select
    return TrialJob(
        framework=trial.framework,
        task=backend.task.name,
        seed=trial.seed,
        init=trial.init,
        method=trial.method,
        train=trial.train,
        lora=trial.lora,
        arch=arch_fields,
        num_classes=0,
        num_train=inputs.num_train,
        data=str(inputs.data[backend.data]),
        init_checkpoint=str(init),
        out_dir=str(out_dir),
        threads=threads,
        device=device,
        extra={"select": {"metric": select.metric, "mode": select.direction()}},
        seeds=trial.seeds,
    )


class LMTrainer(HFTrainer):
    """The HF trainer with `lm_main` as its child: the same event lines, checkpoints
    and parameter counts; its reload re-measures a causal LM's metrics."""

    child = "sweeper.trainers.hf.lm_main"

    def remeasure(self, job: TrialJob, checkpoint: Path, split: str, step: int) -> Measured:
        """A best checkpoint's answers on `split` and its `loss`, `perplexity` and
        `exact_match`, measured as the trial measured them."""
        from sweeper.trainers.reload import lm_predict

        return lm_predict(job, checkpoint, step, (split,))[split]
