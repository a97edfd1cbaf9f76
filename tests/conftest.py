"""Shared fixtures: small specs written to tmp_path, and GPU-test skipping (shared
names that tests import live in tests/support/)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

# Nothing a test starts (MLflow clients and servers, Ray nodes) reports usage to its
# vendor: tests send traffic to 127.0.0.0/8 only. The CLI sets the same defaults.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# The test-only `dummy` trainer is a plugin (sweeper.frameworks) that lives in
# tests/support: every process a test starts (the CLI, Ray workers, Ray job drivers)
# inherits the plugin variable and the repository root on its import path.
REPO_ROOT = str(Path(__file__).resolve().parents[1])
os.environ["SWEEPER_PLUGINS"] = "tests.support.dummy_trainer:register"
os.environ["PYTHONPATH"] = os.pathsep.join(
    [REPO_ROOT, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
)
# A cluster the developer started with `sweeper cluster up` (recorded in ~/.sweeper) would
# become every test sweep's default tracking store: tests see a $SWEEPER_HOME of their
# own, empty unless a test starts a cluster there (children inherit it).
os.environ["SWEEPER_HOME"] = os.path.join(
    tempfile.gettempdir(), f"sweeper-tests-home-{os.getpid()}"
)


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
