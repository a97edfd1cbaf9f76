"""The vocabulary both frameworks share: a sentencepiece model plus a fairseq `dict.txt`.

Token ids are defined by fairseq's `Dictionary.load` of `dict.txt` (4 specials `<s>`
`<pad>` `</s>` `<unk>` = 0..3, then the file's entries in order, then `<mask>` added by
the `sentence_prediction` and `masked_lm` tasks). The HF side reads those same ids, so
there is exactly one encoding; nothing here builds a second, HF-specific vocabulary.
"""

from __future__ import annotations

import io
import os
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sweeper.data.errors import DataError

FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
"""fairseq's Dictionary always starts with these, in this order (ids 0..3)."""
BOS, PAD, EOS, UNK = 0, 1, 2, 3
MASK_SYMBOLS = 1
"""`<mask>`, appended by the tasks after the dict entries."""
_OVERWRITE = "#fairseq:overwrite"


def model_vocab_size(dict_entries: int) -> int:
    """Embedding rows the model sees: 4 specials + dict entries + `<mask>`."""
    return len(FAIRSEQ_SPECIALS) + dict_entries + MASK_SYMBOLS


def train_sentencepiece(
    lines: Iterable[str],
    vocab_size: int,
    model_type: str = "bpe",
    character_coverage: float = 1.0,
) -> bytes:
    """Train a sentencepiece model (BPE unless `model_type` says otherwise) on `lines`;
    returns the serialized model.

    `hard_vocab_limit=False` lets a small corpus yield fewer pieces than asked instead
    of failing; the dict (and so the model's vocab size) follows what was learned.
    One thread keeps the model byte-identical run to run.
    """
    import sentencepiece as spm

    buffer = io.BytesIO()
    settings: dict[str, Any] = {
        "sentence_iterator": iter(list(lines)),
        "model_writer": buffer,
        "model_type": model_type,
        "vocab_size": vocab_size,
        "hard_vocab_limit": False,
        "character_coverage": character_coverage,
        "num_threads": 1,
    }
    try:
        sys.stderr.fileno()  # sentencepiece silences its log by redirecting this descriptor
    except (AttributeError, OSError, ValueError):  # a captured or notebook stderr: it logs
        spm.SentencePieceTrainer.train(**settings)
        return buffer.getvalue()
    with open(os.devnull, "w") as quiet:
        spm.SentencePieceTrainer.train(**settings, logstream=quiet)
    return buffer.getvalue()


def preprocess_dictionary(processor: Any, lines: Iterable[str]) -> Any:
    """fairseq's `Dictionary` of the encoded `lines`, built as `fairseq-preprocess`
    builds it from `spm_encode` output: every piece counted (`add_symbol`, plus `</s>`
    per line), then `finalize` with its defaults (no threshold, all words, entries
    sorted by count and padded to a multiple of 8). `save` writes its `dict.txt`."""
    from fairseq.data import Dictionary

    dictionary = Dictionary()
    for pieces in processor.encode(list(lines), out_type=str):
        for piece in pieces:
            dictionary.add_symbol(piece)
        dictionary.add_symbol(dictionary.eos_word)
    dictionary.finalize(threshold=-1, nwords=-1, padding_factor=8)
    return dictionary


def load_sentencepiece(path: Path) -> Any:
    """The model's `SentencePieceProcessor`; a missing or corrupt file is a DataError."""
    import sentencepiece as spm

    if not path.is_file():
        raise DataError("sentencepiece model not found (model.sentencepiece)", path)
    processor = spm.SentencePieceProcessor()
    try:
        processor.load(str(path))
    except (RuntimeError, OSError) as exc:
        raise DataError(f"not a sentencepiece model ({exc})", path) from None
    return processor


def dict_entries_from_sentencepiece(processor: Any, lines: Iterable[str]) -> list[tuple[str, int]]:
    """fairseq dict entries for every normal piece, in the model's order, with the
    piece's count in `lines` (fairseq keeps counts; they do not affect ids).

    The demo corpus's dict only (`generate.py`): its ids, and so every published demo
    number, are fixed by this order. A tokenizer trained from a user's data gets the dict
    `fairseq-preprocess` would build (`preprocess_dictionary`), like the lab's files."""
    counts: Counter[str] = Counter()
    for pieces in processor.encode(list(lines), out_type=str):
        counts.update(pieces)
    entries = []
    for i in range(processor.get_piece_size()):
        if processor.is_control(i) or processor.is_unknown(i) or processor.is_unused(i):
            continue
        piece = processor.id_to_piece(i)
        entries.append((piece, counts[piece]))
    return entries


def write_dict(path: Path, entries: Iterable[tuple[str, int]]) -> None:
    """Write a fairseq `dict.txt` ("symbol count" per line), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(f"{symbol} {count}\n" for symbol, count in entries), encoding="utf-8")
    tmp.replace(path)


def check_dict(path: Path) -> list[str]:
    """Validate `dict.txt` the way fairseq parses it; returns its symbols in order.

    fairseq's own errors ("Incorrect dictionary format", "Duplicate word found") name
    neither the file nor the line, so the same rules are checked here first.
    """
    if not path.is_file():
        raise DataError("fairseq dictionary not found (model.dictionary)", path)
    raw = path.read_bytes()
    if not raw.strip():
        raise DataError("file is empty", path)
    symbols: list[str] = []
    seen: set[str] = set()
    for number, line_bytes in enumerate(raw.split(b"\n"), start=1):
        try:
            line = line_bytes.decode("utf-8").rstrip()
        except UnicodeDecodeError as exc:
            raise DataError(f"not valid UTF-8 ({exc.reason})", path, number) from None
        if not line:
            if number == raw.count(b"\n") + 1:
                continue  # the text after the final newline
            raise DataError("empty line; expected '<symbol> <count>'", path, number)
        symbol, overwrite = _parse_dict_line(line, path, number)
        if symbol in FAIRSEQ_SPECIALS:
            raise DataError(
                f"{symbol!r} is one of fairseq's built-in specials; dict.txt must not list it",
                path,
                number,
            )
        if symbol in seen and not overwrite:
            raise DataError(f"duplicate symbol {symbol!r}", path, number)
        if symbol not in seen:
            symbols.append(symbol)
            seen.add(symbol)
    return symbols


def fairseq_ids(path: Path) -> dict[str, int]:
    """Every symbol's id as fairseq numbers them: the specials, dict.txt's symbols in
    order, then `<mask>` (what an HF tokenizer must agree with to share a model)."""
    symbols = [*FAIRSEQ_SPECIALS, *check_dict(path), "<mask>"]
    return {symbol: index for index, symbol in enumerate(symbols)}


def _parse_dict_line(line: str, path: Path, number: int) -> tuple[str, bool]:
    """`symbol count [#fairseq:overwrite]` -> (symbol, overwrite), as fairseq reads it."""
    symbol, _, field = line.rpartition(" ")
    overwrite = field == _OVERWRITE
    if overwrite:
        symbol, _, field = symbol.rpartition(" ")
    if not symbol or not field.isdigit():
        raise DataError(f"expected '<symbol> <count>', got {line!r}", path, number)
    return symbol, overwrite


def load_fairseq_dict(path: Path) -> Any:
    """fairseq's `Dictionary` for `path` (validated first, for a located message)."""
    check_dict(path)
    from fairseq.data import Dictionary

    dictionary = Dictionary.load(str(path))
    expected = (FAIRSEQ_SPECIALS[BOS], FAIRSEQ_SPECIALS[PAD], FAIRSEQ_SPECIALS[EOS])
    got = (dictionary[dictionary.bos()], dictionary[dictionary.pad()], dictionary[dictionary.eos()])
    if got != expected or dictionary.unk() != UNK:
        raise DataError(f"fairseq Dictionary specials are {got}, expected {expected}", path)
    return dictionary
