"""Token-id datasets and batching for the HF child process.

The prepared jsonl files hold exactly the ids fairseq binarized (`<s> ... </s>`), so
nothing here tokenizes: a split is read once into tensors and batches are padded with
fairseq's pad id. The `datasets` library is deliberately not used; a plain torch
Dataset keeps the child's imports and start-up small.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from sweeper.trainers.metrics import ClassCounts, accuracy_percent, classification_metrics

PAD_ID = 1
"""fairseq's `<pad>`; HF RoBERTa derives position ids from it, so both must agree."""
SPLITS = ("train", "valid", "test")


class TokenIdDataset(Dataset):
    """One split: each item is `{"input_ids": LongTensor, "labels": int}`."""

    def __init__(self, input_ids: list[torch.Tensor], labels: list[int]):
        if len(input_ids) != len(labels):
            raise ValueError(f"{len(input_ids)} sequences but {len(labels)} labels")
        self.input_ids = input_ids
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor | int]:
        return {"input_ids": self.input_ids[index], "labels": self.labels[index]}

    @property
    def max_length(self) -> int:
        return max((len(ids) for ids in self.input_ids), default=0)


def read_split(path: Path) -> TokenIdDataset:
    """Read `{"input_ids": [...], "label": k}` lines; blank lines are ignored."""
    if not path.is_file():
        raise FileNotFoundError(f"prepared HF split not found: {path}")
    input_ids: list[torch.Tensor] = []
    labels: list[int] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                ids, label = record["input_ids"], int(record["label"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}:{number}: not an input_ids/label record") from exc
            input_ids.append(torch.tensor(ids, dtype=torch.long))
            labels.append(label)
    return TokenIdDataset(input_ids, labels)


def read_splits(hf_dir: Path) -> dict[str, TokenIdDataset]:
    """All three splits of a prepared folder."""
    return {split: read_split(Path(hf_dir) / f"{split}.jsonl") for split in SPLITS}


class PadCollator:
    """Right-pads a batch to its longest sequence; the mask marks real tokens.

    Built by hand (one `torch.full` and a slice copy per row) because it runs once per
    update, and transformers' generic collators spend more time than the tiny models
    this project tests with.
    """

    def __init__(self, pad_id: int = PAD_ID):
        self.pad_id = pad_id

    def __call__(self, items: list[dict[str, torch.Tensor | int]]) -> dict[str, torch.Tensor]:
        sequences = [item["input_ids"] for item in items]
        width = max(len(ids) for ids in sequences)
        input_ids = torch.full((len(items), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(items), width), dtype=torch.long)
        for row, ids in enumerate(sequences):
            input_ids[row, : len(ids)] = ids
            attention_mask[row, : len(ids)] = 1
        labels = torch.tensor([int(item["labels"]) for item in items], dtype=torch.long)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def argmax_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Keep only predicted classes during evaluation (transformers'
    `preprocess_logits_for_metrics` hook), so nothing bigger is gathered."""
    if isinstance(logits, tuple):
        logits = logits[0]
    return logits.argmax(dim=-1)


def compute_accuracy(eval_prediction) -> dict[str, float]:
    """transformers' `compute_metrics`: accuracy, macro-F1 and per-class precision,
    recall and F1 in percent (0–100), the unit the lab's tables and fairseq use, from
    integer counts (`metrics.ClassCounts`) through `metrics.accuracy_percent` and
    `metrics.classification_metrics`, so each is the float fairseq's trials and
    `--evaluate` compute for the same predictions (not a mean of booleans, which may
    differ in the last bit)."""
    predictions = np.asarray(eval_prediction.predictions).reshape(-1)
    labels = np.asarray(eval_prediction.label_ids).reshape(-1)
    counts = ClassCounts.of(predictions.tolist(), labels.tolist())
    return {
        "accuracy": accuracy_percent(counts.correct(), counts.total()),
        **classification_metrics(counts),
    }
