"""Pre-flight: every input file a sweep reads is checked before anything is written.

docs/architecture.md, invariant 5 (bad input fails early and clearly) needs more than
a valid spec: `sweeper run` opens the MLflow store (a SQLite file in `output_dir`)
before it prepares the data, and a pretrained checkpoint of the wrong shape would only
fail inside the trials, after their runs exist. So `check_inputs` reads what the sweep
will read, cheaply and with the same readers preparation and trials use (one way to
check each thing): the raw splits (UTF-8, aligned text/label lines, known labels),
the sentencepiece model (it loads), `dict.txt` (fairseq's line rules, the vocabulary
size the arch declares) and the pretrained checkpoint (a fairseq state dict whose
tensors match the spec's arch). `check_inputs` raises the first problem as a
`DataError`, whose text reads `FILE[:LINE]: what is wrong (expected ...)`; `preflight`
returns it as an error line for the caller to print. Nothing is created.

Files sweeper produces itself (the generated demo corpus, its sentencepiece model and
dict, the pretraining stage's checkpoint) are not checked here: they do not exist yet.
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

from sweeper import backends
from sweeper.data.errors import DataError
from sweeper.spec.schema import SweepSpec


def preflight(spec: SweepSpec) -> list[str]:
    """The problems that stop `spec` from running, as `FILE[:LINE]: ...` lines (empty
    when none; checking stops at the first problem, as every later check reads what
    the earlier ones vouched for)."""
    try:
        check_inputs(spec)
    except DataError as exc:
        return [str(exc)]
    return []


def check_inputs(spec: SweepSpec) -> None:
    """Raise DataError naming the first unusable input file of `spec`: the data files,
    then what the spec's task checks itself (`sweeper.backends.Task.check`: its labels,
    its pretrained weights), then the pretraining stage's settings."""
    vocab_size: int | None = None
    labels: list[str] | None = None
    if spec.data.source == "files":
        vocab_size, labels = check_data_files(spec)
    backends.load(backends.task(spec.task).check)(spec, vocab_size, labels)
    check_pretrain(spec)


def check_classification(spec: SweepSpec, vocab_size: int | None, labels: list[str] | None) -> None:
    """The classification task's checks: `train.num_classes` holds the data's labels,
    and the pretrained checkpoint fits the arch and the head."""
    if labels is not None:
        from sweeper.trainers.classification import check_classes

        check_classes(spec, tuple(labels))
    classes = len(labels) if labels is not None else None
    check_checkpoint(spec, vocab_size or spec.model.arch.vocab_size, classes)


def check_causal_lm(spec: SweepSpec, vocab_size: int | None, labels: list[str] | None) -> None:
    """The causal-LM task's checks: `model.checkpoint`, when a pretrained trial starts
    from it, is a local HF causal-LM folder that fits the arch and the vocabulary."""
    if spec.model.checkpoint is not None and "pretrained" in spec.grid.init:
        check_lm_folder(spec, spec.model.checkpoint)


def check_pretrain(spec: SweepSpec) -> None:
    """What the pretraining stage would refuse, refused now: the stage runs beside the
    trials (`sweeper.engine.stage_graph`), after the runs exist (invariant 5)."""
    config, arch = spec.model.pretrain, spec.model.arch
    if config is None or spec.model.checkpoint is not None or "pretrained" not in spec.grid.init:
        return
    if config.max_tokens_per_sample > arch.max_positions:
        raise DataError(
            f"model.pretrain.max_tokens_per_sample ({config.max_tokens_per_sample}) exceeds "
            f"model.arch.max_positions ({arch.max_positions})"
        )


def check_data_files(spec: SweepSpec) -> tuple[int | None, list[str]]:
    """Splits, unlabeled corpus, sentencepiece model and dict; returns the model's
    vocabulary size as the dict defines it (4 specials + entries + `<mask>`; None for a
    tokenizer still to be trained from the data) and the labels, in class order."""
    from sweeper.data.examples import read_examples, read_unlabeled
    from sweeper.data.prepare import check_vocab_size, find_inputs
    from sweeper.data.vocab import check_dict, load_sentencepiece, model_vocab_size

    inputs = find_inputs(spec)
    _, labels = read_examples(spec)
    unlabeled = read_unlabeled(spec)
    if unlabeled is not None and len(unlabeled) < 2:
        raise DataError("needs at least 2 non-empty sentences (model.pretrain)", inputs.unlabeled)
    if inputs.sentencepiece is None or inputs.dictionary is None:
        return None, labels
    load_sentencepiece(inputs.sentencepiece)
    vocab_size = model_vocab_size(len(check_dict(inputs.dictionary)))
    check_vocab_size(spec, vocab_size, inputs.dictionary)
    return vocab_size, labels


def check_checkpoint(spec: SweepSpec, vocab_size: int | None, classes: int | None = None) -> None:
    """The pretrained checkpoint loads as a fairseq state dict, and (when the vocabulary
    size is known) its encoder tensors fit the spec's arch exactly, as trials need.
    `classes`: the data's labels (None: `data.labels`, generated data's explicit list)."""
    path = spec.model.checkpoint
    if path is None or "pretrained" not in spec.grid.init:
        return
    if path.is_dir():
        check_hf_folder(spec, path, vocab_size)
        return
    if not path.is_file():
        raise DataError(
            "pretrained checkpoint not found (model.checkpoint; expected a fairseq model.pt "
            "or an HF model folder)",
            path,
        )
    import torch

    from sweeper.models.init import initial_state, read_fairseq_state

    expected = "expected a fairseq checkpoint saved with torch.save, e.g. fairseq's model.pt"
    try:
        state = read_fairseq_state(path)
    except ValueError:
        state = {}
    except (pickle.UnpicklingError, zipfile.BadZipFile, RuntimeError, EOFError, OSError) as exc:
        raise DataError(f"not a PyTorch checkpoint: {exc} ({expected})", path) from None
    if not any(isinstance(value, torch.Tensor) for value in state.values()):
        raise DataError(f"no `model` state dict of tensors in the file ({expected})", path)
    if vocab_size is None:
        return  # the generated dict does not exist yet: trials check the shapes
    if classes is None:
        classes = len(spec.data.labels) if spec.data.labels != "auto" else spec.train.num_classes
    try:
        initial_state(spec.model.arch, vocab_size, classes, "pretrained", 0, path)
    except (ValueError, AttributeError, KeyError) as exc:
        detail = str(exc).removeprefix(f"{path} ")
        raise DataError(
            f"{detail} (expected the encoder of model.arch with vocab_size {vocab_size})", path
        ) from None


def check_lm_folder(spec: SweepSpec, folder: Path) -> None:
    """A causal-LM sweep's `model.checkpoint`: a local HF causal-LM folder."""
    from sweeper.data.vocab import fairseq_ids
    from sweeper.models.llama import lm_folder_problems

    dictionary = spec.model.dictionary
    vocab = len(fairseq_ids(dictionary)) if dictionary and dictionary.is_file() else None
    problems = lm_folder_problems(folder, vocab) if folder.is_dir() else [f"{folder}: not a folder"]
    if problems:
        raise DataError("not usable as the pretrained decoder: " + "; ".join(problems), folder)


def check_hf_folder(spec: SweepSpec, folder: Path, vocab_size: int | None) -> None:
    """An HF folder as `model.checkpoint`: every problem `sweeper.models.hf_import`
    finds, at once (the vocabulary only when the dictionary exists already)."""
    from sweeper.data.vocab import fairseq_ids
    from sweeper.models.hf_import import folder_problems

    dictionary = spec.model.dictionary
    ids = fairseq_ids(dictionary) if dictionary and dictionary.is_file() else None
    problems = folder_problems(folder, spec.model.arch, vocab_size, dictionary, ids)
    if problems:
        raise DataError("not usable as the pretrained model: " + "; ".join(problems), folder)
