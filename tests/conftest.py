"""Shared fixtures: small specs written to tmp_path, and GPU-test skipping."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

# Nothing a test starts (MLflow clients and servers, Ray nodes) reports usage to its
# vendor: tests send traffic to 127.0.0.0/8 only. The CLI sets the same defaults.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

REPO = Path(__file__).resolve().parents[1]
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


@pytest.fixture
def write_spec(tmp_path: Path):
    """Write a mapping (or raw text) as tmp_path/NAME and return its path."""

    def write(content: dict[str, Any] | str, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        text = content if isinstance(content, str) else yaml.safe_dump(content)
        path.write_text(text, encoding="utf-8")
        return path

    return write


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`gpu` tests run only where CUDA is present; everywhere else they are skipped."""
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
