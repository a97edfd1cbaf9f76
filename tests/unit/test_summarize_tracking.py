"""Where a spec's MLflow record lives (sweeper.tracking.store), without creating a store."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.specio import validate_mapping
from sweeper.summarize.load import SummarizeError, check_store
from sweeper.tracking import artifact_root, experiment_name, tracking_uri


def spec(tmp_path: Path, **extra):
    raw = {
        "name": "demo",
        "output_dir": "runs/demo",
        "data": {"source": "generated", "dir": "corpus", "generate": {}},
        "model": {
            "arch": {"layers": 1, "embed_dim": 8, "ffn_dim": 8, "heads": 1, "max_positions": 8},
            "sentencepiece": "sp.model",
            "dictionary": "dict.txt",
            "pretrain": {},
        },
        **extra,
    }
    return validate_mapping(raw, "demo.yaml", base_dir=tmp_path)


def test_defaults_live_in_output_dir(tmp_path):
    s = spec(tmp_path)
    out = (tmp_path / "runs" / "demo").resolve()
    assert tracking_uri(s) == f"sqlite:///{out}/mlflow.db"
    assert tracking_uri(s).startswith("sqlite:////")  # absolute path: four slashes
    assert artifact_root(s) == out / "mlartifacts"
    assert experiment_name(s) == "demo"


def test_tracking_block_overrides(tmp_path):
    s = spec(tmp_path, tracking={"uri": "http://127.0.0.1:5000", "experiment": "lab"})
    assert tracking_uri(s) == "http://127.0.0.1:5000"
    assert experiment_name(s) == "lab"


def test_check_store_refuses_missing_sqlite_file_and_creates_nothing(tmp_path):
    db = tmp_path / "none" / "mlflow.db"
    with pytest.raises(SummarizeError, match="no MLflow store at"):
        check_store(f"sqlite:///{db}")
    assert not db.exists()
    db.parent.mkdir()
    db.write_bytes(b"")
    check_store(f"sqlite:///{db}")


def test_check_store_refuses_an_unreachable_server():
    with pytest.raises(SummarizeError, match="cannot reach the tracking server"):
        check_store("http://127.0.0.1:9")
