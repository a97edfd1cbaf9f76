"""The starting weights of a trial, written once and read by both frameworks.

docs/architecture.md, invariant 2: fairseq and HF trials of one seed start from the very
same weights, so a difference between frameworks is the frameworks'. `init_checkpoint`
writes one fairseq-format file per (arch, init, seed): the encoder (fairseq's own random
init under the seed, or the pretrained checkpoint's weights) plus a seed-derived
classification head. fairseq starts from it with `--finetune-from-model` (a head that
matches the task's name and num_classes is kept, not re-drawn); HF starts from
`hf_init_state`, the same file through `sweeper.models.convert`. The head depends only
on the seed (not on the init), so pretrained and random trials of a seed also share
their head.

The file holds only tensors and plain Python values, so it loads with
`torch.load(weights_only=True)`, which is what fairseq's loader does under torch >= 2.6.

torch is imported by the functions that make or read tensors, not by the module: a
trial whose starting file is cached (every trial of a sweep but the first of its seed)
finds it without importing torch, which is slow in a Ray trial's worker and would delay
the start of the trainer subprocess (which imports torch anyway; docs/benchmarks.md has
the measurements).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.hashing import file_sha256
from sweeper.models.arch import HEAD_NAME, build_fairseq_model, hf_config
from sweeper.spec.model_block import ArchConfig

if TYPE_CHECKING:
    from fairseq.models.roberta import RobertaModel
    from torch import Tensor
    from transformers import RobertaConfig, RobertaForSequenceClassification

FORMAT_VERSION = 1
"""Bump when what the file contains changes for the same inputs: old caches then miss."""
INITS = ("random", "pretrained")
_NO_LM_HEAD = ("classification_heads.", "encoder.lm_head.")


def derived_seed(seed: int, purpose: str) -> int:
    """A seed for one purpose (e.g. the head) that is not correlated with `seed`'s stream."""
    digest = hashlib.sha256(f"sweeper:{purpose}:{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


def init_checkpoint(
    arch: ArchConfig,
    vocab_size: int,
    num_classes: int,
    init: str,
    seed: int,
    pretrained: Path | None,
    out_dir: Path,
) -> Path:
    """Path of the fairseq-format starting checkpoint for this trial, written if missing.

    Cached by a hash of everything that determines its tensors (the pretrained file by
    content), so every trial of a seed, in either framework and on any node sharing
    `out_dir`, gets the same file. Written atomically: concurrent trials never read a
    half-written file, and two writers write identical content.
    """
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    if init == "pretrained" and pretrained is None:
        raise ValueError("init 'pretrained' needs the pretrained fairseq checkpoint's path")
    identity = {
        "format": FORMAT_VERSION,
        "arch": arch.model_dump(mode="json"),
        "vocab_size": vocab_size,
        "num_classes": num_classes,
        "init": init,
        "seed": seed,
        "pretrained_sha256": file_sha256(Path(pretrained)) if init == "pretrained" else None,
    }
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    path = Path(out_dir) / f"init-{init}-s{seed}-{key}.pt"
    if path.is_file():
        return path
    state = initial_state(arch, vocab_size, num_classes, init, seed, pretrained)
    atomic_save(_fairseq_checkpoint(state, identity), path)
    return path


def initial_state(
    arch: ArchConfig,
    vocab_size: int,
    num_classes: int,
    init: str,
    seed: int,
    pretrained: Path | None,
) -> dict[str, Tensor]:
    """The fairseq `model` state dict a trial starts from (see the module docstring).

    The caller's RNG state is left untouched: drawing happens in a forked RNG. The
    tensors keep fairseq's tying (LM-head weight = token embeddings), stored once.
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build_fairseq_model(arch, vocab_size)
        torch.manual_seed(derived_seed(seed, "classification-head"))
        model.register_classification_head(HEAD_NAME, num_classes=num_classes)
    if init == "pretrained":
        assert pretrained is not None
        _load_pretrained_encoder(model, Path(pretrained))
    return model.state_dict()


def read_fairseq_state(path: Path) -> dict[str, Tensor]:
    """The `model` state dict of a fairseq checkpoint (e.g. from `masked_lm` training).

    fairseq's own checkpoints pickle their config objects, so they need
    `weights_only=False`: only load checkpoints this project or its user produced.
    """
    import torch

    raw = torch.load(path, map_location="cpu", weights_only=False)
    state = raw.get("model", raw) if isinstance(raw, dict) else None
    if not isinstance(state, dict):
        raise ValueError(f"{path}: not a fairseq checkpoint (no `model` state dict)")
    return state


def _load_pretrained_encoder(model: RobertaModel, path: Path) -> None:
    """Copy every encoder and LM-head weight from a pretrained fairseq checkpoint.

    Its classification heads (another task's) are dropped; the seed's head stays. An
    encoder without an LM head (converted from an HF `*Model` folder) keeps the seed's
    fresh one: fine-tuning never uses it. Any
    missing, extra or differently shaped tensor is an error naming it: a pretrained
    checkpoint of another architecture or vocabulary must not load partially.
    """
    from sweeper.models.convert import has_lm_head, normalise_fairseq_keys

    own = model.state_dict()
    loaded = {
        key: value
        for key, value in normalise_fairseq_keys(read_fairseq_state(path)).items()
        if not key.startswith("classification_heads.")
    }
    skipped = ("classification_heads.",) if has_lm_head(loaded) else _NO_LM_HEAD
    wanted = {key for key in own if not key.startswith(skipped)}
    problems = [f"missing {key}" for key in sorted(wanted - loaded.keys())]
    problems += [f"unexpected {key}" for key in sorted(loaded.keys() - own.keys())]
    problems += [
        f"{key}: shape {tuple(loaded[key].shape)} in the checkpoint, "
        f"{tuple(own[key].shape)} for the spec's arch"
        for key in sorted(wanted & loaded.keys())
        if loaded[key].shape != own[key].shape
    ]
    if problems:
        shown = "; ".join(problems[:8]) + (
            f"; … {len(problems) - 8} more" if len(problems) > 8 else ""
        )
        raise ValueError(f"{path} does not match the spec's model.arch/vocab_size: {shown}")
    model.load_state_dict({**own, **loaded}, strict=True)


def _fairseq_checkpoint(state: dict[str, Tensor], identity: dict[str, Any]) -> dict[str, Any]:
    """Wrap a state dict in the checkpoint layout `fairseq-train` loads.

    `trainer.load_checkpoint` reads `model`, `optimizer_history` (num_updates 0: the
    model starts untrained) and `extra_state.train_iterator`; `--finetune-from-model`
    resets optimizer, scheduler, meters and data iterator, so nothing else is needed.
    `cfg`/`args` are None: the architecture comes from the trainer's command line.
    """
    return {
        "model": state,
        "args": None,
        "cfg": None,
        "optimizer_history": [
            {
                "criterion_name": "SentencePredictionCriterion",
                "optimizer_name": "none",
                "lr_scheduler_state": {"best": None},
                "num_updates": 0,
            }
        ],
        "extra_state": {"train_iterator": {"epoch": 1, "iterations_in_epoch": 0}},
        "last_optimizer_state": None,
        "sweeper": identity,
    }


def atomic_save(obj: Any, path: Path) -> None:
    """torch.save to a temporary file beside `path`, then rename it into place."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            torch.save(obj, out)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def read_init_checkpoint(path: Path) -> tuple[ArchConfig, dict[str, Tensor]]:
    """The arch recorded in an `init_checkpoint` file and its fairseq state dict."""
    import torch

    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    identity = checkpoint.get("sweeper")
    if not identity:
        raise ValueError(f"{path} was not written by init_checkpoint (no `sweeper` record)")
    return ArchConfig.model_validate(identity["arch"]), checkpoint["model"]


def _sizes(state: dict[str, Tensor]) -> tuple[int, int]:
    """(vocab_size, num_classes) read off the tensors themselves."""
    vocab = state["encoder.sentence_encoder.embed_tokens.weight"].shape[0]
    classes = state[f"classification_heads.{HEAD_NAME}.out_proj.weight"].shape[0]
    return int(vocab), int(classes)


def hf_init_state(
    path: Path, dropout: float = 0.1, attention_dropout: float = 0.1
) -> tuple[RobertaConfig, dict[str, Tensor]]:
    """HF config and `RobertaForSequenceClassification` state dict of an init file.

    The same file fairseq starts from, converted: load it with `strict=True`.
    """
    from sweeper.models.convert import fairseq_to_hf

    arch, state = read_init_checkpoint(path)
    vocab_size, num_classes = _sizes(state)
    config = hf_config(arch, vocab_size, num_classes, dropout, attention_dropout)
    return config, fairseq_to_hf(state)


def hf_init_model(
    path: Path, dropout: float = 0.1, attention_dropout: float = 0.1
) -> RobertaForSequenceClassification:
    """HF's classifier holding an init file's weights (strictly loaded)."""
    from transformers import RobertaForSequenceClassification

    config, state = hf_init_state(path, dropout, attention_dropout)
    model = RobertaForSequenceClassification(config)
    model.load_state_dict(state, strict=True)
    return model


def fairseq_init_model(
    path: Path, dropout: float = 0.1, attention_dropout: float = 0.1
) -> RobertaModel:
    """fairseq's RobertaModel (with the sentence head) holding an init file's weights."""
    arch, state = read_init_checkpoint(path)
    vocab_size, num_classes = _sizes(state)
    model = build_fairseq_model(arch, vocab_size, num_classes, dropout, attention_dropout)
    model.load_state_dict(state, strict=True)
    return model
