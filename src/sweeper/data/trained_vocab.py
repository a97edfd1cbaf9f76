"""`model.tokenizer.train`: the sentencepiece model and `dict.txt` trained from the data.

The tokenizer learns from the text a model may learn from: the unlabeled corpus (when
the spec reads one) and the train split's texts (both texts of a pair), never valid or
test. Sentencepiece is trained by `sweeper.data.vocab.train_sentencepiece` (the same
trainer the demo corpus uses); `dict.txt` is fairseq's own `Dictionary` of that text
encoded with the new model (`vocab.preprocess_dictionary`, as `fairseq-preprocess`).

The pair is cached by content in `output_dir/tokenizer/<hash>`, the hash covering the
training text (normalised, in order) and the settings: the same text and settings
reuse the files ("tokenizer: cache hit <hash>"), any change trains a new pair. The
folder is written under a temporary name and renamed, so an interrupted training is
redone rather than trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sweeper.data.rawtext import RawSplit
from sweeper.spec.model_block import TokenizerTraining
from sweeper.spec.schema import SweepSpec

TOKENIZER_VERSION = 1
"""Bump when the same text and settings would train different files."""
TOKENIZER_DIR = "tokenizer"
SENTENCEPIECE_FILE = "sentencepiece.model"
DICT_FILE = "dict.txt"
SETTINGS_FILE = "tokenizer.json"


@dataclass(frozen=True)
class TrainedVocab:
    """A trained tokenizer's files, and whether they came from the cache."""

    hash: str
    sentencepiece: Path
    dictionary: Path
    cached: bool


def training_text(splits: Mapping[str, RawSplit], unlabeled: Sequence[str] | None) -> list[str]:
    """The unlabeled corpus, then the train split's texts (and second texts)."""
    train = splits["train"]
    return [*(unlabeled or ()), *train.texts, *(train.texts2 or ())]


def tokenizer_hash(settings: TokenizerTraining, lines: Sequence[str]) -> str:
    """16 hex digits over the version, the settings and every training line."""
    digest = hashlib.sha256()
    header = {"version": TOKENIZER_VERSION, "settings": settings.model_dump(mode="json")}
    digest.update(json.dumps(header, sort_keys=True).encode())
    for line in lines:
        digest.update(line.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()[:16]


def ensure_tokenizer(
    spec: SweepSpec,
    splits: Mapping[str, RawSplit],
    unlabeled: Sequence[str] | None,
    log: Callable[[str], None] = print,
) -> TrainedVocab:
    """The spec's trained sentencepiece model and dict, trained unless cached."""
    assert spec.model.tokenizer is not None
    settings = spec.model.tokenizer.train
    lines = training_text(splits, unlabeled)
    key = tokenizer_hash(settings, lines)
    root = spec.output_dir / TOKENIZER_DIR / key
    model, dictionary = root / SENTENCEPIECE_FILE, root / DICT_FILE
    if (root / SETTINGS_FILE).is_file():
        log(f"tokenizer: cache hit {key} ({root})")
        return TrainedVocab(key, model, dictionary, cached=True)

    import sentencepiece as spm

    from sweeper.data.vocab import preprocess_dictionary, train_sentencepiece

    log(
        f"tokenizer: training sentencepiece {settings.model_type} (vocab {settings.vocab_size}) "
        f"on {len(lines)} texts ({len(unlabeled or ())} unlabeled + train) -> {root}"
    )
    proto = train_sentencepiece(
        lines, settings.vocab_size, settings.model_type, settings.character_coverage
    )
    processor = spm.SentencePieceProcessor(model_proto=proto)
    fairseq_dict = preprocess_dictionary(processor, lines)
    tmp = root.with_name(f".{key}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        (tmp / SENTENCEPIECE_FILE).write_bytes(proto)
        fairseq_dict.save(str(tmp / DICT_FILE))
        record = {
            "hash": key,
            "settings": settings.model_dump(mode="json"),
            "texts": len(lines),
            "pieces": processor.get_piece_size(),
            "dict_entries": len(fairseq_dict) - fairseq_dict.nspecial,
        }
        (tmp / SETTINGS_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        try:
            tmp.rename(root)
        except OSError:
            if not (root / SETTINGS_FILE).is_file():
                raise  # not a concurrent run's identical copy
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"tokenizer: {record['pieces']} pieces, dict.txt {record['dict_entries']} entries ({key})")
    return TrainedVocab(key, model, dictionary, cached=False)
