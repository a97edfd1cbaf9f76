"""Prompt/answer data of a causal-LM sweep (`task: causal_lm`), prepared once, cached.

A split is its text file (the prompts) and its label file: each label line is the
answer itself, or, with `data.answers` (label -> answer text), the label's answer. The
demo sets `answers` so that the generated review corpus becomes a question -> answer
task: a review, then the verdict phrase of its polarity ("je le recommande vivement" or
"une perte de temps"). Only 12 of the 60 adjectives occur in training answers, and the
unlabeled corpus puts every adjective before same-polarity verdicts, so only a model
pretrained on it can answer reviews with the other 48 (sweeper.data.demo_corpus).

Prompts and answers are encoded with the sweep's sentencepiece model and numbered by
its fairseq dictionary (`sweeper.data.vocab.fairseq_ids`), the ids of every other
prepared file. The folder is `output_dir/prepared/lm-<hash>` over the same inputs as the
classification data (`sweeper.data.prepare.content_hash`) plus the answers:
`{train,valid,test}.jsonl` with one `{"prompt": [ids], "answer": [ids]}` per line,
`symbols.json` (each id's symbol, the dictionary's numbering: what turns a generated
answer's ids back into text where the dictionary is not, on any node a trial runs on),
and `pretrain.jsonl` (the unlabeled corpus' ids) when the spec pretrains.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sweeper.data.errors import DataError
from sweeper.data.examples import read_unlabeled
from sweeper.data.generate import ensure_generated
from sweeper.data.prepare import PREPARED_DIR, SPLITS, content_hash, find_inputs
from sweeper.data.rawtext import read_lines
from sweeper.data.vocab import UNK, fairseq_ids, load_sentencepiece
from sweeper.spec.schema import SweepSpec

LM_VERSION = 2
"""Of the folder's layout (2: with `SYMBOLS_FILE`); it enters the folder's hash."""
PRETRAIN_FILE = "pretrain/ids.jsonl"
"""In a folder of its own: the pretraining cache key hashes that folder only."""
META_FILE = "lm.json"
SYMBOLS_FILE = "symbols.json"

Log = Callable[[str], None]


@dataclass(frozen=True)
class LMData:
    """A prepared prompt/answer folder and what trials need to know about it."""

    dir: Path
    vocab_size: int
    num_train: int
    pretrain: Path | None

    @classmethod
    def load(cls, root: Path) -> LMData:
        meta = json.loads((root / META_FILE).read_text(encoding="utf-8"))
        pretrain = root / PRETRAIN_FILE
        found = pretrain if pretrain.is_file() else None
        return cls(root, meta["vocab_size"], meta["num_train"], found)


def prepare_lm(spec: SweepSpec, log: Log = print) -> LMData:
    """Generate the demo corpus if asked, then encode prompts and answers (cached)."""
    if spec.data.source == "generated":
        ensure_generated(spec, log)
    inputs = find_inputs(spec)
    digest = hashlib.sha256(content_hash(spec, inputs).encode())
    digest.update(json.dumps([LM_VERSION, spec.data.answers], sort_keys=True).encode())
    root = spec.output_dir / PREPARED_DIR / f"lm-{digest.hexdigest()[:16]}"
    if (root / META_FILE).is_file():
        log(f"cached: {root}")
        return LMData.load(root)
    encode = _encoder(spec)
    tmp = root.with_name(root.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    counts = {}
    for split in SPLITS:
        files = inputs.splits[split]
        prompts = [line.strip() for line in read_lines(files.text, f"{split} prompt file")]
        answers = _answers(spec, files.label, len(prompts))
        rows = [
            {"prompt": p, "answer": a}
            for p, a in zip(encode(prompts), encode(answers), strict=True)
        ]
        _write_jsonl(tmp / f"{split}.jsonl", _fit(rows, spec.model.arch.max_positions))
        counts[split] = len(rows)
    unlabeled = read_unlabeled(spec) if spec.model.pretrain is not None else None
    if unlabeled is not None:
        rows = [{"ids": ids} for ids in encode(unlabeled)]
        (tmp / PRETRAIN_FILE).parent.mkdir()
        _write_jsonl(tmp / PRETRAIN_FILE, rows)
    assert spec.model.dictionary is not None  # causal_lm: the schema requires the files
    index = fairseq_ids(spec.model.dictionary)
    vocab_size = len(index)
    symbols = sorted(index, key=index.__getitem__)
    (tmp / SYMBOLS_FILE).write_text(
        json.dumps(symbols, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    meta = {"vocab_size": vocab_size, "num_train": counts["train"], "splits": counts}
    (tmp / META_FILE).write_text(json.dumps(meta) + "\n", encoding="utf-8")
    if root.exists():  # another process prepared it meanwhile: same bytes
        shutil.rmtree(tmp)
    else:
        os.replace(tmp, root)
    log(f"prepared: {root} ({', '.join(f'{k} {v}' for k, v in counts.items())} examples)")
    return LMData.load(root)


def _encoder(spec: SweepSpec) -> Callable[[Sequence[str]], list[list[int]]]:
    assert spec.model.sentencepiece is not None and spec.model.dictionary is not None
    processor = load_sentencepiece(spec.model.sentencepiece)
    index = fairseq_ids(spec.model.dictionary)

    def encode(texts: Sequence[str]) -> list[list[int]]:
        pieces = processor.encode(list(texts), out_type=str)
        return [[index.get(p, UNK) for p in row] for row in pieces]

    return encode


def _answers(spec: SweepSpec, path: Path, expected: int) -> list[str]:
    """Each prompt's answer text: the label file's line, or `data.answers[line]`."""
    lines = [line.strip() for line in read_lines(path, "answer file")]
    if len(lines) != expected:
        raise DataError(f"{len(lines)} answers for {expected} prompts: one line each", path)
    mapping = spec.data.answers
    if mapping is None:
        return lines
    unknown = sorted(set(lines) - set(mapping))
    if unknown:
        raise DataError(f"labels {unknown} have no entry in data.answers", path)
    return [mapping[line] for line in lines]


def _fit(rows: list[dict[str, list[int]]], max_positions: int) -> list[dict[str, list[int]]]:
    """Truncate prompts from the left so BOS + prompt + answer + EOS fit the model."""
    fitted = []
    for row in rows:
        room = max_positions - len(row["answer"]) - 2
        if room < 1:
            raise DataError(f"an answer of {len(row['answer'])} tokens leaves no room for a prompt")
        fitted.append({"prompt": row["prompt"][-room:], "answer": row["answer"]})
    return fitted


def _write_jsonl(path: Path, rows: Sequence[dict[str, list[int]]]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, separators=(",", ":")) + "\n")


def read_symbols(root: Path) -> list[str] | None:
    """Each id's symbol in a prepared folder (`SYMBOLS_FILE`), or None for a folder
    without them (laid out before `LM_VERSION` 2)."""
    path = Path(root) / SYMBOLS_FILE
    if not path.is_file():
        return None
    return list(json.loads(path.read_text(encoding="utf-8")))


def read_jsonl(path: Path) -> list[dict[str, list[int]]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
