"""`PreparedData`: the handle on a prepared folder that trainers and the sweep engine use.

Kept apart from the pipeline that builds the folder so that a worker which only
receives the folder's path can open it without importing anything heavy.

Layout of `root`:
  fairseq/input0/{train,valid,test}.{bin,idx}, dict.txt   sentence_prediction inputs
  fairseq/input1/{train,valid,test}.{bin,idx}, dict.txt   second texts (sentence pairs only)
  fairseq/label/{train,valid,test}.{bin,idx}, dict.txt    labels, in data.labels order
  fairseq/pretrain/{train,valid}.{bin,idx}, dict.txt      masked_lm (only with model.pretrain)
  hf/{train,valid,test}.jsonl                             {"input_ids": [0,...,2], "label": k}
                                                          (pairs: [0, A, 2, 2, B, 2])
  stats.json                                              the statistics `prepare` prints
  prepared.json                                           manifest read by `PreparedData.load`
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeper.data.errors import DataError

MANIFEST_FILE = "prepared.json"
STATS_FILE = "stats.json"


@dataclass(frozen=True)
class PreparedData:
    """A prepared folder, as trainers and the sweep engine use it.

    `vocab_size` is the model's embedding rows (4 specials + dict entries + `<mask>`);
    class k is `labels[k]` in both frameworks; `num_train` sizes the LR schedule
    (updates = ceil(num_train / batch_size) x epochs).
    """

    root: Path
    vocab_size: int
    num_classes: int
    num_train: int
    labels: tuple[str, ...]
    max_positions: int
    has_pretrain: bool
    stats: dict[str, Any] = field(compare=False, hash=False, repr=False)

    @property
    def fairseq_dir(self) -> Path:
        """The DATA argument of `fairseq-train --task sentence_prediction`."""
        return self.root / "fairseq"

    @property
    def hf_dir(self) -> Path:
        return self.root / "hf"

    @property
    def pretrain_dir(self) -> Path | None:
        """The DATA argument of `fairseq-train --task masked_lm`; None without pretraining."""
        return self.root / "fairseq" / "pretrain" if self.has_pretrain else None

    @property
    def dictionary(self) -> Path:
        """The fairseq dict.txt the ids were made with (a copy of model.dictionary)."""
        return self.fairseq_dir / "input0" / "dict.txt"

    def hf_file(self, split: str) -> Path:
        return self.hf_dir / f"{split}.jsonl"

    def num_sentences(self, split: str) -> int:
        return int(self.stats["splits"][split]["sentences"])

    @classmethod
    def load(cls, root: Path | str) -> PreparedData:
        """Open a folder `prepare` wrote (e.g. on a worker that got only the path)."""
        root = Path(root)
        try:
            manifest = json.loads((root / MANIFEST_FILE).read_text(encoding="utf-8"))
            stats = json.loads((root / STATS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DataError(f"not a prepared data folder ({exc})", root) from None
        return cls(
            root=root,
            vocab_size=manifest["vocab_size"],
            num_classes=manifest["num_classes"],
            num_train=manifest["num_train"],
            labels=tuple(manifest["labels"]),
            max_positions=manifest["max_positions"],
            has_pretrain=manifest["has_pretrain"],
            stats=stats,
        )
