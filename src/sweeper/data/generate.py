"""`data.source: generated`: write the demo corpus, its sentencepiece model and dict.

This stands in for the files a lab hands out (CLS-books splits, `sentencepiece.bpe.model`,
`dict.txt`), so the rest of preparation treats generated and supplied data alike.
A stamp file records the hash of everything that determines the output; while it
matches and the files exist, generating again is a no-op (seconds saved on every
`sweeper run`, and unchanged bytes keep the prepared-data cache valid).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from sweeper.data.demo_corpus import generate_corpus, write_corpus, write_lines
from sweeper.data.examples import UNLABELED_FILE
from sweeper.data.vocab import dict_entries_from_sentencepiece, train_sentencepiece, write_dict
from sweeper.spec.schema import SweepSpec

GENERATOR_VERSION = 2
"""Bump when the generator's output changes for the same settings."""
STAMP_FILE = ".sweeper-generated.json"


def generate_settings(spec: SweepSpec) -> dict:
    """Everything the generated files depend on, as JSON-able values."""
    data = spec.data
    assert data.generate is not None and data.labels != "auto"
    return {
        "version": GENERATOR_VERSION,
        "generate": data.generate.model_dump(mode="json"),
        "labels": list(data.labels[:2]),
        "splits": dict(data.splits),
        "text_suffix": data.text_suffix,
        "label_suffix": data.label_suffix,
        "sentencepiece": str(spec.model.sentencepiece),
        "dictionary": str(spec.model.dictionary),
    } | ({"text2_suffix": data.text2_suffix} if data.text2_suffix else {})


def settings_hash(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def generated_files(spec: SweepSpec) -> list[Path]:
    """Every file generation writes; all must exist for the stamp to count."""
    data = spec.data
    suffixes = [
        data.text_suffix,
        data.label_suffix,
        *([data.text2_suffix] * bool(data.text2_suffix)),
    ]
    files = [data.dir / f"{stem}.{suffix}" for stem in data.splits.values() for suffix in suffixes]
    return [*files, data.dir / UNLABELED_FILE, spec.model.sentencepiece, spec.model.dictionary]


def is_generated(spec: SweepSpec) -> bool:
    """True when the files on disk were generated from exactly these settings."""
    stamp = spec.data.dir / STAMP_FILE
    try:
        recorded = json.loads(stamp.read_text(encoding="utf-8")).get("hash")
    except (OSError, ValueError, AttributeError):
        return False
    current = settings_hash(generate_settings(spec))
    return recorded == current and all(p.is_file() for p in generated_files(spec))


def ensure_generated(spec: SweepSpec, log: Callable[[str], None] = print) -> bool:
    """Generate the demo corpus, sentencepiece model and dict unless up to date.

    Returns True when files were (re)written. The stamp is written last, so an
    interrupted generation is redone rather than trusted.
    """
    data, cfg = spec.data, spec.data.generate
    assert cfg is not None, "source: generated needs a generate block (the schema enforces it)"
    assert spec.model.sentencepiece is not None and spec.model.dictionary is not None
    assert data.labels != "auto", "source: generated has explicit labels (the schema enforces it)"
    if is_generated(spec):
        log(f"demo corpus up to date: {data.dir}")
        return False

    stamp = data.dir / STAMP_FILE
    stamp.unlink(missing_ok=True)
    log(
        f"generating demo corpus in {data.dir} (seed {cfg.seed}: {cfg.train_size}/"
        f"{cfg.valid_size}/{cfg.test_size} reviews, {cfg.unlabeled_size} unlabeled sentences, "
        f"label noise {cfg.label_noise})"
    )
    labels = (data.labels[0], data.labels[1])
    corpus = generate_corpus(cfg, labels, pairs=data.text2_suffix is not None)
    write_corpus(
        corpus,
        data.dir,
        dict(data.splits),
        data.text_suffix,
        data.label_suffix,
        UNLABELED_FILE,
        data.text2_suffix,
    )

    # The tokenizer learns from what a model may learn from: unlabeled + labeled train.
    train = corpus.splits["train"]
    training_text = [*corpus.unlabeled, *train.reviews, *(train.second or ())]
    log(f"training sentencepiece BPE (vocab {cfg.vocab_size}) -> {spec.model.sentencepiece}")
    model = train_sentencepiece(training_text, cfg.vocab_size)
    spec.model.sentencepiece.parent.mkdir(parents=True, exist_ok=True)
    tmp = spec.model.sentencepiece.with_name(f".{spec.model.sentencepiece.name}.tmp")
    tmp.write_bytes(model)
    tmp.replace(spec.model.sentencepiece)

    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=model)
    if processor.get_piece_size() < cfg.vocab_size:
        log(
            f"note: the corpus supports only {processor.get_piece_size()} pieces "
            f"(generate.vocab_size is {cfg.vocab_size})"
        )
    entries = dict_entries_from_sentencepiece(processor, training_text)
    write_dict(spec.model.dictionary, entries)
    log(f"wrote {spec.model.dictionary} ({len(entries)} entries)")

    settings = generate_settings(spec)
    write_lines(stamp, [json.dumps({"hash": settings_hash(settings), "settings": settings})])
    return True
