"""A causal-LM sweep's inputs and trial jobs (`task: causal_lm`; see `trainers.trial`).

Inputs: the prompt/answer data (`sweeper.data.lm_task`) and the `pretrained` decoder,
trained by `sweeper.trainers.hf.lm_pretrain` or named by `model.checkpoint` (a local HF
causal-LM folder). A trial's starting weights are that folder, or for `random` the
seed's freshly drawn `model.arch` decoder (`sweeper.models.llama.random_init`), so the
trials of one seed share their starting point whatever their method. The job tells the
HF trainer which child to run (`extra["task"]`) and what picks the best checkpoint
(`extra["select"]`, the spec's `select:`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sweeper.data.lm_task import LMData
from sweeper.record_names import TASK_CAUSAL_LM
from sweeper.spec.schema import SweepSpec
from sweeper.trainers.base import TrialJob
from sweeper.trial_keys import Trial

Log = Callable[[str], None]


def prepare_lm_inputs(
    spec: SweepSpec, log: Log, need_pretrained: bool
) -> tuple[LMData, Path | None]:
    """The prepared data and, when asked, the pretrained decoder's folder."""
    from sweeper.data.lm_task import prepare_lm

    data = prepare_lm(spec, log)
    pretrained: Path | None = None
    if need_pretrained and "pretrained" in spec.grid.init:
        if spec.model.checkpoint is not None:
            pretrained = spec.model.checkpoint
        else:
            from sweeper.trainers.hf.lm_pretrain import pretrain_lm

            pretrained = pretrain_lm(spec, data, log)
    return data, pretrained


def build_lm_job(
    spec: SweepSpec,
    trial: Trial,
    data: LMData,
    pretrained: Path | None,
    out_dir: Path,
    threads: int,
    device: str,
) -> TrialJob:
    """The trial's job, its starting folder written if it is a new random one."""
    from sweeper.models.llama import random_init

    arch = spec.model.arch.model_copy(update={"vocab_size": data.vocab_size})
    arch_fields = arch.model_dump(mode="json")
    if trial.init == "pretrained":
        if pretrained is None:
            raise ValueError("a pretrained trial needs the pretrained decoder")
        init = pretrained
    else:
        init = random_init(arch_fields, data.vocab_size, trial.seed, spec.output_dir / "init")
    select = spec.select
    return TrialJob(
        framework=trial.framework,
        seed=trial.seed,
        init=trial.init,
        method=trial.method,
        train=trial.train,
        lora=trial.lora,
        arch=arch_fields,
        num_classes=0,
        num_train=data.num_train,
        fairseq_data=str(data.dir),
        hf_data=str(data.dir),
        init_checkpoint=str(init),
        out_dir=str(out_dir),
        threads=threads,
        device=device,
        extra={
            "task": TASK_CAUSAL_LM,
            "select": {"metric": select.metric, "mode": select.direction()},
        },
    )
