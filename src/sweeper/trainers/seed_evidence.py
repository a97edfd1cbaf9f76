"""What a trial's seeds did, measured where it trains: the trial folder's `seeds.json`.

A seed source is held only if the trainer really starts from the same weights and
really reads the examples in the same order; a trainer that re-draws a head or
reshuffles under another seed would break that silently. So each trainer child
(`fairseq_main` through `fairseq/fairseq_seeds.py`, `hf_main` and `lm_main` through
`hf/hf_seeds.py`) writes what it measured into the trial folder
(`record_names.SEEDS_FILE`), next to `trial.json`:

    {"seeds": {"init": 1, "data_order": 2, "dropout": 1},
     "start_weights": "<sha256 of every tensor it starts training from>",
     "data_order": {"1": {"examples": 1800, "sha256": "<sha256 of the ids>"}, ...}}

* `start_weights`: the model's state dict (names, dtypes, shapes, bytes) after the init
  checkpoint is loaded and LoRA wrapped, before the first update; written by a run that
  starts at update 0 (a resumed run starts from trained weights and leaves it as is).
  Digests compare within a framework: the two frameworks name their tensors apart.
* `data_order`: per epoch (1-based), the ids of the training examples in the order the
  trainer was fed them (their line in the prepared train split, in both frameworks),
  hashed; `examples` counts them. A run resumed inside an epoch saw only the rest of
  it: that epoch's entry has no digest, only `partial`, how many ids it saw.

The Reporter sends the two digests with the trial's final report
(`evidence_tags`: `record_names.TAG_START_WEIGHTS`, `TAG_DATA_ORDER`), so the MLflow
record shows which trials started alike without a file upload. Reading needs no torch;
`weights_digest` imports it when called (the children have it loaded).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper import record_names

if TYPE_CHECKING:
    from torch import Tensor

DIGEST_CHARS = 16
"""Hex characters of a digest in a run tag: enough to tell trials apart, short to read."""


def weights_digest(state: Mapping[str, Tensor]) -> str:
    """sha256 of a state dict: every tensor's name, dtype, shape and bytes, by name."""
    import torch

    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().to("cpu").contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def order_digest(ids: Iterable[int]) -> str:
    """sha256 of a sequence of example ids, in order."""
    return hashlib.sha256(",".join(str(int(i)) for i in ids).encode()).hexdigest()


class SeedEvidence:
    """The `seeds.json` of one trial folder, as its trainer child fills it in."""

    def __init__(self, trial_dir: Path, seeds: Mapping[str, int], examples: int):
        self.path = Path(trial_dir) / record_names.SEEDS_FILE
        self.examples = examples
        """Training examples per epoch: an epoch seen whole feeds each once."""
        earlier = read(Path(trial_dir)) or {}
        same = earlier.get("seeds") == dict(seeds)  # a resume of the same trial
        self.record: dict[str, Any] = {
            "seeds": dict(seeds),
            "start_weights": earlier.get("start_weights") if same else None,
            "data_order": dict(earlier.get("data_order") or {}) if same else {},
        }

    def started(self, state: Mapping[str, Tensor]) -> None:
        """The weights of a run starting at update 0."""
        self.record["start_weights"] = weights_digest(state)
        self.record["data_order"] = {}  # a fresh start: earlier epochs are not this run's
        self._write()

    def epoch(self, epoch: int, ids: Sequence[int]) -> None:
        """The ids one epoch fed, in order; an epoch seen in part is noted as such."""
        whole = len(ids) == self.examples
        entry = (
            {"examples": len(ids), "sha256": order_digest(ids)} if whole else {"partial": len(ids)}
        )
        self.record["data_order"][str(epoch)] = entry
        self._write()

    def _write(self) -> None:
        temp = self.path.with_name(self.path.name + ".tmp")
        temp.write_text(json.dumps(self.record, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(temp, self.path)


def read(trial_dir: Path) -> dict[str, Any] | None:
    """A trial folder's `seeds.json`, or None when its trainer wrote none (an older
    sweeper's, a backend that does not measure it, a trainer that has not started)."""
    path = Path(trial_dir) / record_names.SEEDS_FILE
    if not path.is_file():
        return None
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def data_order(record: Mapping[str, Any]) -> str | None:
    """One digest of every epoch's order, or None unless every epoch was seen whole."""
    epochs = record.get("data_order") or {}
    digests = [epochs[e].get("sha256") for e in sorted(epochs, key=int)]
    if not digests or None in digests:
        return None
    return hashlib.sha256(",".join(digests).encode()).hexdigest()


def evidence_tags(trial_dir: Path) -> dict[str, str]:
    """The run tags of a trial folder's evidence (shortened digests); empty without it."""
    record = read(trial_dir)
    if record is None:
        return {}
    tags = {}
    start = record.get("start_weights")
    if isinstance(start, str):
        tags[record_names.TAG_START_WEIGHTS] = start[:DIGEST_CHARS]
    order = data_order(record)
    if order is not None:
        tags[record_names.TAG_DATA_ORDER] = order[:DIGEST_CHARS]
    return tags
