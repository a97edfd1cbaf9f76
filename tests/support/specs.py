"""The smallest valid spec and where the shipped sweeps live, for tests that build specs.

Kept here rather than in tests/conftest.py: test modules import these names, and with a
conftest.py in more than one folder `from conftest import ...` would depend on which of
them Python imported first.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

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
