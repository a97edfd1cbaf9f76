"""`prepare(spec)`: raw splits -> one encoding -> each backend's dataset, cached.

Preparation runs once per sweep, not per trial, and every trial of every framework
reads its output, which is what makes "same inputs across frameworks" hold. The output
folder is `output_dir/prepared/<hash>`, the hash covering every input byte that can
change an id (split files or tables and how they are read, sentencepiece model and
dict or the settings of the tokenizer trained from the data, labels, max_positions,
the unlabeled corpus when one is read) plus the format version (and the set of folders
written, when a plugin's backend adds one: `folder_name`). Same inputs -> same folder
-> nothing to do; any change -> a new folder, never a stale one. Each folder is written
by the writer its backend names (`sweeper.backends.Backend.write`).

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

from sweeper import backends
from sweeper.data.errors import DataError
from sweeper.data.examples import SPLITS, unlabeled_path
from sweeper.data.generate import STAMP_FILE, ensure_generated
from sweeper.data.prepared import MANIFEST_FILE, STATS_FILE, PreparedData
from sweeper.spec.schema import SweepSpec

PREPARE_VERSION = 2
"""Bump when the prepared format changes, so old caches are not reused."""
PREPARED_DIR = "prepared"
PRETRAIN_VALID_FRACTION = 0.05
PRETRAIN_VALID_MAX = 500
"""masked_lm validation only tracks the loss; a few hundred sentences are enough."""

Log = Callable[[str], None]


@dataclass(frozen=True)
class SplitFiles:
    """One split's raw files (`format: lines`)."""

    text: Path
    label: Path
    text2: Path | None = None
    """Second texts of sentence pairs (`data.text2_suffix`)."""


@dataclass(frozen=True)
class Inputs:
    """The files one preparation reads, checked to exist."""

    splits: dict[str, SplitFiles]
    """`format: lines`: each split's files; empty for a table format (see `tables`)."""
    sentencepiece: Path | None
    """None (with `dictionary`): trained from the data (`model.tokenizer.train`)."""
    dictionary: Path | None
    unlabeled: Path | None
    tables: tuple[Path, ...] = ()
    """A table format's files (or `hf_disk` folders), in `data.files` split order."""


def find_inputs(spec: SweepSpec) -> Inputs:
    """Locate every input file; a missing one is a DataError naming it and its field."""
    data = spec.data
    splits = {}
    tables: tuple[Path, ...] = ()
    for split in SPLITS:
        if split not in data.splits:
            raise DataError(f"data.splits has no {split!r} split; expected train, valid and test")
    if data.format == "lines":
        for split in SPLITS:
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
    else:
        names = [data.files[s] for s in SPLITS] if data.files is not None else [data.file]
        tables = tuple(data.dir / str(name) for name in names)
        for path in tables:
            if not (path.is_dir() if data.format == "hf_disk" else path.is_file()):
                field = "data.files" if data.files is not None else "data.file"
                raise DataError(f"{data.format} data not found ({field}, data.dir)", path)
    model = spec.model
    if model.tokenizer is None:
        assert model.sentencepiece is not None and model.dictionary is not None
        if not model.sentencepiece.is_file():
            raise DataError(
                "sentencepiece model not found (model.sentencepiece)", model.sentencepiece
            )
        if not model.dictionary.is_file():
            raise DataError("fairseq dictionary not found (model.dictionary)", model.dictionary)
    unlabeled = unlabeled_path(spec)
    if unlabeled is not None and not unlabeled.exists():
        needs = "model.pretrain needs" if model.pretrain is not None else "data.unlabeled names"
        raise DataError(
            f"{needs} the unlabeled corpus (data.unlabeled; by default unlabeled.txt, one "
            "sentence per line), which is not there",
            unlabeled,
        )
    return Inputs(splits, model.sentencepiece, model.dictionary, unlabeled, tables)


def folder_name(spec: SweepSpec, inputs: Inputs) -> str:
    """The prepared folder's name: `content_hash`, and the folders the task's backends
    write (`sweeper.backends.writers`) when a plugin's backend adds to those of the
    built-in ones (only then: a folder of the built-in backends keeps its name), so a
    cached folder holds every folder its trials read."""
    name = content_hash(spec, inputs)
    folders = list(backends.writers(spec.task))
    if folders == list(backends.writers(spec.task, plugins=False)):
        return name
    return hashlib.sha256(json.dumps([name, folders]).encode()).hexdigest()[:16]


def content_hash(spec: SweepSpec, inputs: Inputs) -> str:
    """16 hex digits over every byte and setting that can change a prepared id. A
    trained tokenizer enters through its settings: its files are a function of them
    and of the text hashed here already."""
    from sweeper.hashing import tree_sha256

    digest = hashlib.sha256()

    def add(tag: str, payload: bytes) -> None:
        digest.update(f"{tag}:{len(payload)}:".encode())
        digest.update(payload)

    def add_path(tag: str, path: Path) -> None:
        add(tag, tree_sha256(path).encode() if path.is_dir() else path.read_bytes())

    data = spec.data
    add("version", str(PREPARE_VERSION).encode())
    add("labels", json.dumps(data.labels if data.labels == "auto" else list(data.labels)).encode())
    add("max_positions", str(spec.model.arch.max_positions).encode())
    for split, files in sorted(inputs.splits.items()):
        add(f"{split}.text", files.text.read_bytes())
        add(f"{split}.label", files.label.read_bytes())
        if files.text2 is not None:  # only then: a single-text hash has no text2 part
            add(f"{split}.text2", files.text2.read_bytes())
    if inputs.tables:  # only then: a `lines` hash has no table part
        fields = data.model_dump(
            mode="json",
            include={"format", "files", "file", "split_field", "text_field", "text2_field",
                     "label_field", "splits"},
        )  # fmt: skip
        add("table", json.dumps(fields, sort_keys=True).encode())
        for number, path in enumerate(inputs.tables):
            add_path(f"table{number}", path)
    if inputs.sentencepiece is not None and inputs.dictionary is not None:
        add("sentencepiece", inputs.sentencepiece.read_bytes())
        add("dictionary", inputs.dictionary.read_bytes())
    else:
        from sweeper.data.trained_vocab import TOKENIZER_VERSION

        assert spec.model.tokenizer is not None
        settings = {"version": TOKENIZER_VERSION, **spec.model.tokenizer.model_dump(mode="json")}
        add("tokenizer", json.dumps(settings, sort_keys=True).encode())
    if inputs.unlabeled is not None:
        add("unlabeled", str(inputs.unlabeled.name).encode())  # its name fixes its format
        add_path("unlabeled", inputs.unlabeled)
    return digest.hexdigest()[:16]


def prepare(spec: SweepSpec, log: Log = print, force: bool = False) -> PreparedData:
    """Generate the demo corpus if asked, then encode and binarize the data, cached.

    Raises DataError (naming file and line) on bad input, before writing anything
    under `output_dir/prepared` (or training a tokenizer). `force` rebuilds even when
    a cached folder exists (a trained tokenizer stays cached).
    """
    from sweeper.data.split_stats import format_stats

    if spec.data.source == "generated":
        if force:
            (spec.data.dir / STAMP_FILE).unlink(missing_ok=True)
        ensure_generated(spec, log)
    inputs = find_inputs(spec)
    root = spec.output_dir / PREPARED_DIR / folder_name(spec, inputs)
    if force and root.exists():
        shutil.rmtree(root)
    if (root / MANIFEST_FILE).is_file():
        prepared = PreparedData.load(root)
        manifest = json.loads((root / MANIFEST_FILE).read_text(encoding="utf-8"))
        check_vocab_size(spec, prepared.vocab_size, Path(manifest["dictionary"]))
        if manifest.get("tokenizer"):
            log(f"tokenizer: cache hit {manifest['tokenizer']} ({manifest['sentencepiece']})")
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
    from sweeper.data.encode import Encoder
    from sweeper.data.examples import read_examples, read_unlabeled
    from sweeper.data.split_stats import split_stats
    from sweeper.data.vocab import load_fairseq_dict, load_sentencepiece, model_vocab_size

    raw, labels = read_examples(spec)
    unlabeled = read_unlabeled(spec)
    if unlabeled is not None and len(unlabeled) < 2:
        raise DataError("needs at least 2 non-empty sentences", inputs.unlabeled)
    sentencepiece, dictionary_path, tokenizer = inputs.sentencepiece, inputs.dictionary, None
    if sentencepiece is None or dictionary_path is None:
        from sweeper.data.trained_vocab import ensure_tokenizer

        trained = ensure_tokenizer(spec, raw, unlabeled, log)
        sentencepiece, dictionary_path, tokenizer = (
            trained.sentencepiece,
            trained.dictionary,
            trained.hash,
        )
    processor = load_sentencepiece(sentencepiece)
    dictionary = load_fairseq_dict(dictionary_path)
    dict_entries = len(dictionary) - dictionary.nspecial
    vocab_size = model_vocab_size(dict_entries)
    check_vocab_size(spec, vocab_size, dictionary_path)

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
        "pairs": raw["train"].texts2 is not None,
        "splits": {split.name: split_stats(split, labels) for split in encoded},
        "pretrain": None,
    }
    pretrain = None
    if unlabeled is not None and spec.model.pretrain is not None:
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
        "sentencepiece": str(sentencepiece),
        "dictionary": str(dictionary_path),
        "tokenizer": tokenizer,
    }
    tmp = root.with_name(f".{root.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for folder, writer in backends.writers(spec.task).items():
            log(f"writing {folder} -> {root / folder}")
            write = backends.load(writer)
            write(tmp / folder, encoded, pretrain, dictionary_path, labels, len(dictionary))
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
