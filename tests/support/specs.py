"""The smallest valid spec and where the shipped sweeps live, for tests that build specs.

Kept here rather than in tests/conftest.py: test modules import these names, and with a
conftest.py in more than one folder `from conftest import ...` would depend on which of
them Python imported first.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sweeper.spec.schema import SweepSpec

REPO = Path(__file__).resolve().parents[2]
SWEEPS = REPO / "sweeps"

MINIMAL: dict[str, Any] = {
    "name": "t",
    "output_dir": "out",
    "data": {"source": "files", "dir": "data"},
    "model": {
        "arch": {"layers": 1, "embed_dim": 16, "ffn_dim": 16, "heads": 2, "max_positions": 32},
        "sentencepiece": "m/sp.model",
        "dictionary": "m/dict.txt",
        "checkpoint": "m/model.pt",
    },
}


def minimal_spec() -> dict[str, Any]:
    """A fresh copy of the smallest valid spec (files that need not exist)."""
    return copy.deepcopy(MINIMAL)


def tiny_pretrain_spec(root: Path, steps: int) -> SweepSpec:
    """The demo sweep shrunk for a pretraining stage of seconds: a generated corpus of
    400 unlabeled sentences under `root`, a 1-layer 16-dim RoBERTa, `steps` updates."""
    from sweeper.spec.load import load_spec

    corpus = root / "corpus"
    return load_spec(
        SWEEPS / "demo.yaml",
        [
            f"output_dir={root / 'out'}",
            f"data.dir={corpus}",
            f"model.sentencepiece={corpus / 'sentencepiece.bpe.model'}",
            f"model.dictionary={corpus / 'dict.txt'}",
            "data.generate.train_size=40",
            "data.generate.valid_size=20",
            "data.generate.test_size=20",
            "data.generate.unlabeled_size=400",
            "data.generate.vocab_size=200",
            "model.arch.layers=1",
            "model.arch.embed_dim=16",
            "model.arch.ffn_dim=32",
            "model.arch.heads=2",
            "model.arch.max_positions=64",
            f"model.pretrain.steps={steps}",
            "model.pretrain.batch_size=16",
            "model.pretrain.max_tokens_per_sample=32",
        ],
    )
