"""`prepare(spec)`: raw splits -> one encoding -> fairseq and HF datasets, cached.

Preparation runs once per sweep, not per trial, and every trial of every framework
reads its output, which is what makes "same inputs across frameworks" hold. The output
folder is `output_dir/prepared/<hash>`, the hash covering every input byte that can
change an id (split files, sentencepiece model, dict, labels, max_positions, the
unlabeled corpus when pretraining) plus the format version. Same inputs -> same folder
-> nothing to do; any change -> a new folder, never a stale one.

The folder is built under a temporary name and renamed at the end, so a failure (bad
data is reported before anything is written) never leaves a half-prepared folder that
a later run would mistake for a cached one.

The folder's layout is documented in `sweeper.data.prepared`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper.data.errors import DataError
from sweeper.data.generate import STAMP_FILE, UNLABELED_FILE, ensure_generated
from sweeper.data.prepared import MANIFEST_FILE, STATS_FILE, PreparedData
from sweeper.spec.schema import SweepSpec

PREPARE_VERSION = 1
"""Bump when the prepared format changes, so old caches are not reused."""
PREPARED_DIR = "prepared"
SPLITS = ("train", "valid", "test")
PRETRAIN_VALID_FRACTION = 0.05
PRETRAIN_VALID_MAX = 500
"""masked_lm validation only tracks the loss; a few hundred sentences are enough."""

Log = Callable[[str], None]


@dataclass(frozen=True)
class SplitFiles:
    """One split's raw files."""

    text: Path
    label: Path
    text2: Path | None = None
    """Second texts of sentence pairs (`data.text2_suffix`)."""


@dataclass(frozen=True)
class Inputs:
    """The files one preparation reads, checked to exist."""

    splits: dict[str, SplitFiles]
    sentencepiece: Path
    dictionary: Path
    unlabeled: Path | None


def find_inputs(spec: SweepSpec) -> Inputs:
    """Locate every input file; a missing one is a DataError naming it and its field."""
    data = spec.data
    splits = {}
    for split in SPLITS:
        if split not in data.splits:
            raise DataError(f"data.splits has no {split!r} split; expected train, valid and test")
        stem = data.splits[split]
        files = SplitFiles(
            data.dir / f"{stem}.{data.text_suffix}",
            data.dir / f"{stem}.{data.label_suffix}",
            data.dir / f"{stem}.{data.text2_suffix}" if data.text2_suffix else None,
        )
        for path in (files.text, files.label, files.text2):
            if path is not None and not path.is_file():
                raise DataError(f"{split} split file not found (data.dir, data.splits)", path)
        splits[split] = files
    model = spec.model
    if not model.sentencepiece.is_file():
        raise DataError("sentencepiece model not found (model.sentencepiece)", model.sentencepiece)
    if not model.dictionary.is_file():
        raise DataError("fairseq dictionary not found (model.dictionary)", model.dictionary)
    unlabeled = None
    if model.pretrain is not None:
        unlabeled = data.dir / UNLABELED_FILE
        if not unlabeled.is_file():
            raise DataError(
                "model.pretrain needs the unlabeled corpus, one sentence per line", unlabeled
            )
    return Inputs(splits, model.sentencepiece, model.dictionary, unlabeled)


def content_hash(spec: SweepSpec, inputs: Inputs) -> str:
    """16 hex digits over every byte and setting that can change a prepared id."""
    digest = hashlib.sha256()

    def add(tag: str, payload: bytes) -> None:
        digest.update(f"{tag}:{len(payload)}:".encode())
        digest.update(payload)

    add("version", str(PREPARE_VERSION).encode())
    add("labels", json.dumps(list(spec.data.labels)).encode())
    add("max_positions", str(spec.model.arch.max_positions).encode())
    for split, files in sorted(inputs.splits.items()):
        add(f"{split}.text", files.text.read_bytes())
        add(f"{split}.label", files.label.read_bytes())
        if files.text2 is not None:  # only then: a single-text hash has no text2 part
            add(f"{split}.text2", files.text2.read_bytes())
    add("sentencepiece", inputs.sentencepiece.read_bytes())
    add("dictionary", inputs.dictionary.read_bytes())
    if inputs.unlabeled is not None:
        add("unlabeled", inputs.unlabeled.read_bytes())
    return digest.hexdigest()[:16]


def prepare(spec: SweepSpec, log: Log = print, force: bool = False) -> PreparedData:
    """Generate the demo corpus if asked, then encode and binarize the data, cached.

    Raises DataError (naming file and line) on bad input, before writing anything
    under `output_dir/prepared`. `force` rebuilds even when a cached folder exists.
    """
    from sweeper.data.split_stats import format_stats

    if spec.data.source == "generated":
        if force:
            (spec.data.dir / STAMP_FILE).unlink(missing_ok=True)
        ensure_generated(spec, log)
    inputs = find_inputs(spec)
    root = spec.output_dir / PREPARED_DIR / content_hash(spec, inputs)
    if force and root.exists():
        shutil.rmtree(root)
    if (root / MANIFEST_FILE).is_file():
        prepared = PreparedData.load(root)
        check_vocab_size(spec, prepared.vocab_size, inputs.dictionary)
        log(f"cached: {root}")
        log(format_stats(prepared.stats))
        return prepared
    prepared = build(spec, inputs, root, log)
    log(f"prepared: {root}")
    log(format_stats(prepared.stats))
    return prepared


def check_vocab_size(spec: SweepSpec, vocab_size: int, dict_path: Path) -> None:
    """A set `model.arch.vocab_size` must match the dict: the embedding rows would not
    line up with the ids otherwise (and a pretrained checkpoint would not load)."""
    wanted = spec.model.arch.vocab_size
    if wanted is not None and wanted != vocab_size:
        raise DataError(
            f"gives a vocabulary of {vocab_size} (4 specials + {vocab_size - 5} entries + "
            f"<mask>), but model.arch.vocab_size is {wanted}",
            dict_path,
        )


def build(spec: SweepSpec, inputs: Inputs, root: Path, log: Log) -> PreparedData:
    """Read and validate everything in memory, then write `root` atomically."""
    from sweeper.data.binarize import (
        PRETRAIN_DIR,
        write_hf_jsonl,
        write_masked_lm,
        write_sentence_prediction,
    )
    from sweeper.data.encode import Encoder
    from sweeper.data.rawtext import read_corpus, read_split
    from sweeper.data.split_stats import split_stats
    from sweeper.data.vocab import load_fairseq_dict, load_sentencepiece, model_vocab_size

    labels = list(spec.data.labels)
    raw = {
        name: read_split(name, files.text, files.label, labels, files.text2)
        for name, files in inputs.splits.items()
    }
    unlabeled = read_corpus(inputs.unlabeled) if inputs.unlabeled is not None else None
    processor = load_sentencepiece(inputs.sentencepiece)
    dictionary = load_fairseq_dict(inputs.dictionary)
    dict_entries = len(dictionary) - dictionary.nspecial
    vocab_size = model_vocab_size(dict_entries)
    check_vocab_size(spec, vocab_size, inputs.dictionary)

    log(f"encoding {', '.join(f'{n} ({len(s.texts)})' for n, s in raw.items())}")
    encoder = Encoder(processor, dictionary, spec.model.arch.max_positions)
    encoded = [
        encoder.encode(name, split.texts, split.labels, split.texts2) for name, split in raw.items()
    ]
    stats: dict[str, Any] = {
        "hash": root.name,
        "vocab_size": vocab_size,
        "dict_entries": dict_entries,
        "num_classes": len(labels),
        "labels": labels,
        "max_positions": spec.model.arch.max_positions,
        "pairs": spec.data.text2_suffix is not None,
        "splits": {split.name: split_stats(split, labels) for split in encoded},
        "pretrain": None,
    }
    pretrain = None
    if unlabeled is not None:
        n_valid = max(1, min(PRETRAIN_VALID_MAX, round(len(unlabeled) * PRETRAIN_VALID_FRACTION)))
        if len(unlabeled) <= n_valid:
            raise DataError("needs at least 2 non-empty sentences", inputs.unlabeled)
        log(f"encoding the unlabeled corpus ({len(unlabeled)} sentences, {n_valid} for valid)")
        pretrain = (
            encoder.encode("train", unlabeled[:-n_valid]),
            encoder.encode("valid", unlabeled[-n_valid:]),
        )
        stats["pretrain"] = {s.name: split_stats(s) for s in pretrain}

    manifest = {
        "version": PREPARE_VERSION,
        "vocab_size": vocab_size,
        "num_classes": len(labels),
        "num_train": len(raw["train"].texts),
        "labels": labels,
        "max_positions": spec.model.arch.max_positions,
        "has_pretrain": pretrain is not None,
        "sentencepiece": str(inputs.sentencepiece),
        "dictionary": str(inputs.dictionary),
    }
    tmp = root.with_name(f".{root.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        fairseq_dir = tmp / "fairseq"
        log(f"binarizing for fairseq -> {root / 'fairseq'}")
        write_sentence_prediction(fairseq_dir, encoded, inputs.dictionary, labels, len(dictionary))
        if pretrain is not None:
            write_masked_lm(
                fairseq_dir / PRETRAIN_DIR, *pretrain, inputs.dictionary, len(dictionary)
            )
        for split in encoded:
            write_hf_jsonl(tmp / "hf" / f"{split.name}.jsonl", split)
        (tmp / STATS_FILE).write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
        (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        _publish(tmp, root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return PreparedData.load(root)


def _publish(tmp: Path, root: Path) -> None:
    """Rename into place; if a concurrent prepare won the race, keep its identical copy."""
    try:
        tmp.rename(root)
    except OSError:
        if not (root / MANIFEST_FILE).is_file():
            raise
