"""Where a spec's MLflow record lives (sweeper.tracking.store), without creating a store."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.spec.load import validate_mapping
from sweeper.summarize.mlflow_reader import SummarizeError, check_store
from sweeper.tracking import artifact_root, experiment_name, spec_store_uri
from sweeper.tracking.store import sqlite_path


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
    assert spec_store_uri(s) == f"sqlite:///{out}/mlflow.db"
    assert spec_store_uri(s).startswith("sqlite:////")  # absolute path: four slashes
    assert artifact_root(s) == out / "mlartifacts"
    assert experiment_name(s) == "demo"


def test_tracking_block_overrides(tmp_path):
    s = spec(tmp_path, tracking={"uri": "http://127.0.0.1:5000", "experiment": "lab"})
    assert spec_store_uri(s) == "http://127.0.0.1:5000"
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


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("sqlite:////abs/out/mlflow.db", Path("/abs/out/mlflow.db")),
        ("sqlite:///rel/mlflow.db", Path("rel/mlflow.db")),
        ("sqlite:////abs/mlflow.db?mode=ro&timeout=20", Path("/abs/mlflow.db")),
        ("sqlite:///with%20space.db", Path("with space.db")),
        ("SQLITE:////abs/x.db", Path("/abs/x.db")),
        ("sqlite:///:memory:", None),
        ("sqlite://", None),
        ("postgresql://u@db/mlflow", None),
        ("http://127.0.0.1:5000", None),
        ("/abs/mlruns", None),
    ],
)
def test_sqlite_path_reads_the_database_file_as_sqlalchemy_does(uri, path):
    assert sqlite_path(uri) == path


def test_check_store_refuses_a_missing_file_store(tmp_path):
    with pytest.raises(SummarizeError, match="no MLflow store at"):
        check_store(str(tmp_path / "mlruns"))
    with pytest.raises(SummarizeError, match="no MLflow store at"):
        check_store((tmp_path / "mlruns").as_uri())
    (tmp_path / "mlruns").mkdir()
    check_store(str(tmp_path / "mlruns"))
    check_store("sqlite:///:memory:")  # nothing on disk to look for
