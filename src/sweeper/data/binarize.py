"""Writing encoded splits where each framework reads them: the classification
backends' writers (`sweeper.backends.Backend.write`, each a `Writer`); and reading a
binarized split back (`read_indexed`).

fairseq (`write_fairseq`): `sentence_prediction` layout (`input0/`, `label/`) and
`masked_lm` layout (`pretrain/`), written with fairseq's own indexed-dataset builder
(mmap, the `fairseq-preprocess` default) so fairseq reads them exactly as if it had made
them. HF (`write_hf`): one JSON object per line with the ids the model is fed, which
are by construction the ones fairseq's `sentence_prediction` task feeds with
`--init-token 0`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from sweeper.data.encode import EncodedSplit
from sweeper.data.vocab import EOS, FAIRSEQ_SPECIALS, write_dict

INPUT_DIR = "input0"
INPUT2_DIR = "input1"
"""Second texts of sentence pairs; fairseq's task reads it whenever it exists."""
LABEL_DIR = "label"
PRETRAIN_DIR = "pretrain"
DICT_FILE = "dict.txt"


class Writer(Protocol):
    """Writes one prepared folder, `out`, of a classification sweep: the encoded
    labeled splits, the unlabeled corpus' (train, valid) when the spec pretrains,
    the fairseq dict.txt the ids were numbered by, the labels in class order and the
    dictionary's size."""

    def __call__(
        self,
        out: Path,
        splits: Sequence[EncodedSplit],
        pretrain: tuple[EncodedSplit, EncodedSplit] | None,
        dict_path: Path,
        labels: Sequence[str],
        dict_size: int,
    ) -> None: ...


def write_fairseq(
    out: Path,
    splits: Sequence[EncodedSplit],
    pretrain: tuple[EncodedSplit, EncodedSplit] | None,
    dict_path: Path,
    labels: Sequence[str],
    dict_size: int,
) -> None:
    """The fairseq folder: `sentence_prediction` data, and `pretrain/` for masked_lm
    (the pretraining stage runs in fairseq) when there is an unlabeled corpus."""
    write_sentence_prediction(out, splits, dict_path, labels, dict_size)
    if pretrain is not None:
        write_masked_lm(out / PRETRAIN_DIR, *pretrain, dict_path, dict_size)


def write_hf(
    out: Path,
    splits: Sequence[EncodedSplit],
    pretrain: tuple[EncodedSplit, EncodedSplit] | None,
    dict_path: Path,
    labels: Sequence[str],
    dict_size: int,
) -> None:
    """The HF folder: `{split}.jsonl` of the labeled splits."""
    for split in splits:
        write_hf_jsonl(out / f"{split.name}.jsonl", split)


def write_indexed(prefix: Path, items: Sequence[Sequence[int]], vocab_size: int) -> None:
    """`prefix.bin` + `prefix.idx` with fairseq's builder; ids stored as given."""
    import torch
    from fairseq.data import indexed_dataset

    prefix.parent.mkdir(parents=True, exist_ok=True)
    builder = indexed_dataset.make_builder(
        indexed_dataset.data_file_path(str(prefix)), impl="mmap", vocab_size=vocab_size
    )
    for item in items:
        builder.add_item(torch.tensor(item, dtype=torch.int32))
    builder.finalize(indexed_dataset.index_file_path(str(prefix)))


def read_indexed(prefix: Path) -> list[list[int]]:
    """The items of `prefix.bin` + `prefix.idx`, read with fairseq's own reader: the ids
    exactly as `write_indexed` stored them (for a trainer that is not fairseq)."""
    from fairseq.data import indexed_dataset

    if not indexed_dataset.MMapIndexedDataset.exists(str(prefix)):
        raise FileNotFoundError(f"no indexed dataset {prefix}.bin/.idx")
    dataset = indexed_dataset.MMapIndexedDataset(str(prefix))
    return [dataset[index].tolist() for index in range(len(dataset))]


def write_sentence_prediction(
    out: Path,
    splits: Sequence[EncodedSplit],
    dict_path: Path,
    labels: Sequence[str],
    dict_size: int,
) -> None:
    """`out/input0/{split}.{bin,idx}` + dict, `out/label/{split}.{bin,idx}` + dict, and
    for sentence pairs `out/input1/{split}.{bin,idx}` + dict.

    label/dict.txt lists `labels` in the spec's order. fairseq's class index is
    (dictionary index - nspecial), and the dictionary keeps file order, so class k is
    `labels[k]` - the same index the HF dataset stores. Each label item is
    [label symbol id, `</s>`], as `fairseq-preprocess` writes it (the task strips `</s>`).
    """
    (out / INPUT_DIR).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(dict_path, out / INPUT_DIR / DICT_FILE)
    train = next((s for s in splits if s.name == "train"), splits[0])
    counts = [0] * len(labels)
    for label in train.labels or ():
        counts[label] += 1
    write_dict(out / LABEL_DIR / DICT_FILE, zip(labels, counts, strict=True))
    nspecial = len(FAIRSEQ_SPECIALS)
    label_vocab = nspecial + len(labels) + 1
    pairs = any(split.ids2 is not None for split in splits)
    if pairs:
        (out / INPUT2_DIR).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(dict_path, out / INPUT2_DIR / DICT_FILE)
    for split in splits:
        write_indexed(out / INPUT_DIR / split.name, split.fairseq_items(), dict_size)
        if pairs:
            write_indexed(out / INPUT2_DIR / split.name, split.fairseq_items(True), dict_size)
        label_items = [[nspecial + label, EOS] for label in split.labels or ()]
        write_indexed(out / LABEL_DIR / split.name, label_items, label_vocab)


def write_masked_lm(
    out: Path, train: EncodedSplit, valid: EncodedSplit, dict_path: Path, dict_size: int
) -> None:
    """`out/{train,valid}.{bin,idx}` + dict.txt: the layout `fairseq-train --task
    masked_lm out` reads (it cuts the sentences into blocks itself)."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(dict_path, out / DICT_FILE)
    for split in (train, valid):
        write_indexed(out / split.name, split.fairseq_items(), dict_size)


def write_hf_jsonl(path: Path, split: EncodedSplit) -> None:
    """`{"input_ids": [0, ..., 2], "label": k}` per line, k = position in data.labels."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for ids, label in zip(split.model_inputs(), split.labels or (), strict=True):
            f.write(json.dumps({"input_ids": ids, "label": label}, separators=(",", ":")) + "\n")
