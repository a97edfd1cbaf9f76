"""The classification task's inputs and trial jobs (`task: classification`).

Both built-in classification backends (`sweeper.backends`: fairseq and hf) name these
functions, so their trials read one encoding and start from one weights file
(docs/architecture.md, invariant 2): `prepare_inputs` prepares the data once per sweep
(`sweeper.data.prepare`: a folder of the same ids per backend format, each written by
its `Backend.write`: the built-ins' `fairseq` and `hf`) and the pretrained checkpoints
(`model.checkpoint`, or one per pretraining objective the grid asks for, each trained
by its stage in the backend table, `Task.pretrain`: fairseq's masked LM, HF's causal
LM); `build_job` writes a trial's initial weights (`sweeper.models.init`) from its
objective's checkpoint under its init seed (`Trial.seeds`: trials that hold the init
seed share one file) and gives the job the folder its backend reads and every
source's seed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sweeper import backends
from sweeper.backends import Backend
from sweeper.record_names import METRIC_VALID_ACC, SEED_INIT
from sweeper.spec.schema import SweepSpec
from sweeper.trainers.base import TrialJob
from sweeper.trainers.trial_pipeline import SweepInputs
from sweeper.trial_keys import Trial, objectives

Log = Callable[[str], None]


def prepare_inputs(
    spec: SweepSpec, log: Log = print, need_pretrained: bool = True, force: bool = False
) -> SweepInputs:
    """Prepare data and (if asked) the pretrained checkpoints; all cached across calls.
    `force`: rebuild the prepared folder (and regenerate the demo corpus)."""
    from sweeper.data import prepare

    prepared = prepare(spec, log=log, force=force)
    check_classes(spec, prepared.labels)
    pretrained: dict[str | None, Path] = {}
    if need_pretrained and "pretrained" in spec.grid.init:
        if spec.model.checkpoint is not None:
            pretrained[None] = pretrained_file(spec, prepared.vocab_size, prepared.dictionary, log)
        for objective in objectives(spec):  # one after the other, each cached by content
            stage = backends.load(backends.task(spec.task).pretrain[objective])
            pretrained[objective] = stage(spec, prepared, log)
    return SweepInputs(
        data={folder: Path(prepared.root) / folder for folder in backends.writers(spec.task)},
        root=Path(prepared.root),
        vocab_size=prepared.vocab_size,
        num_classes=prepared.num_classes,
        num_train=prepared.num_train,
        pretrained=pretrained,
    )


def pretrained_file(spec: SweepSpec, vocab_size: int, dictionary: Path, log: Log = print) -> Path:
    """`model.checkpoint` as the fairseq file trials start from: itself, or an HF model
    folder converted once into `output_dir/pretrained/hf-<hash>/model.pt` after the
    checks preflight could not make yet (the vocabulary of a generated or trained
    dictionary: `dictionary`, the prepared data's copy)."""
    from sweeper.data.errors import DataError
    from sweeper.data.vocab import fairseq_ids
    from sweeper.models.hf_import import folder_problems, import_checkpoint, is_hf_folder

    folder = spec.model.checkpoint
    assert folder is not None
    if not is_hf_folder(folder):
        return folder
    problems = folder_problems(
        folder, spec.model.arch, vocab_size, dictionary, fairseq_ids(dictionary)
    )
    if problems:
        raise DataError("not usable as the pretrained model: " + "; ".join(problems), folder)
    converted = import_checkpoint(folder, spec.output_dir / "pretrained")
    log(f"pretrained checkpoint: HF folder {folder}, converted to {converted}")
    return converted


def check_classes(spec: SweepSpec, labels: tuple[str, ...]) -> None:
    """`train.num_classes` sizes every trial's classifier head, so it must hold every
    label the data has (more is allowed: a label absent from these splits). Checked
    once, before pretraining and before any run exists."""
    from sweeper.data.errors import DataError

    asked = [spec.train.num_classes, *spec.grid.params.get("train.num_classes", [])]
    if min(int(n) for n in asked) < len(labels):
        raise DataError(
            f"train.num_classes is {min(asked)}, but the labels have {len(labels)} classes "
            f"({', '.join(labels)}): set train.num_classes to at least {len(labels)}"
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
    """The trial's job, its initial weights written if they are new."""
    from sweeper.models.init import init_checkpoint

    arch = spec.model.arch.model_copy(update={"vocab_size": inputs.vocab_size})
    init = init_checkpoint(
        arch=arch,
        vocab_size=inputs.vocab_size,
        num_classes=int(trial.train["num_classes"]),
        init=trial.init,
        seed=trial.seeds[SEED_INIT],
        pretrained=inputs.pretrained_for(trial) if trial.init == "pretrained" else None,
        out_dir=spec.output_dir / "init",
    )
    return TrialJob(
        framework=trial.framework,
        task=backend.task.name,
        seed=trial.seed,
        init=trial.init,
        method=trial.method,
        train=trial.train,
        lora=trial.lora,
        arch=arch.model_dump(mode="json"),
        num_classes=int(trial.train["num_classes"]),
        num_train=inputs.num_train,
        data=str(inputs.data[backend.data]),
        init_checkpoint=str(init),
        out_dir=str(out_dir),
        threads=threads,
        device=device,
        extra=select_extra(spec),
        seeds=trial.seeds,
    )


def select_extra(spec: SweepSpec) -> dict[str, Any]:
    """`{"select": {...}}` for a classification spec whose `select:` picks on another
    metric or direction than the highest accuracy (`TrialJob.selected`); empty
    otherwise, so a default sweep's trial.json holds no selection."""
    metric, mode = spec.select.metric, spec.select.direction()
    if (metric, mode) == (METRIC_VALID_ACC, "max"):
        return {}
    return {"select": {"metric": metric, "mode": mode}}
