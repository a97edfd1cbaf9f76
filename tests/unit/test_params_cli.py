"""`sweeper params`: input problems exit 2 before any model is built; helpers are light."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweeper.cli.main import main
from sweeper.cli.params import _lora_settings, format_table
from sweeper.models.arch import fairseq_arch_args, position_rows
from sweeper.spec.load import load_spec
from sweeper.spec.model_block import ArchConfig

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"


def _demo_copy(tmp_path: Path, **model: object) -> Path:
    """sweeps/demo.yaml with its data and dict redirected into tmp_path."""
    raw = yaml.safe_load((SWEEPS / "demo.yaml").read_text())
    raw["output_dir"] = str(tmp_path / "out")
    raw["data"]["dir"] = str(tmp_path / "corpus")
    raw["model"]["sentencepiece"] = str(tmp_path / "corpus" / "sp.model")
    raw["model"]["dictionary"] = str(tmp_path / "corpus" / "dict.txt")
    raw["model"].update(model)
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_no_vocab_size_and_no_dict_exits_2_saying_what_to_do(tmp_path, capsys) -> None:
    spec = _demo_copy(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["params", str(spec)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "sweeper prepare" in err and "--vocab-size" in err and "dict.txt" in err


def test_without_spec_every_arch_flag_is_required(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["params", "--layers", "2", "--embed-dim", "64", "--vocab-size", "100"])
    assert exit_info.value.code == 2
    assert "--ffn-dim --heads --max-positions" in capsys.readouterr().err


def test_invalid_arch_flags_exit_2(capsys) -> None:
    flags = ["--layers", "2", "--embed-dim", "64", "--ffn-dim", "64", "--heads", "5"]
    with pytest.raises(SystemExit) as exit_info:
        main(["params", *flags, "--max-positions", "32", "--vocab-size", "100"])
    assert exit_info.value.code == 2
    assert "not divisible by heads 5" in capsys.readouterr().err


def test_lora_settings_follow_the_grid(tmp_path) -> None:
    spec = load_spec(
        _demo_copy(tmp_path), ["grid.method=[full,lora]", "grid.params={lora.r: [4, 8]}"]
    )
    settings = _lora_settings(spec)
    assert [s["r"] for s in settings] == [4, 8]
    assert all(s["target_modules"] == ["query", "value"] for s in settings)
    assert _lora_settings(load_spec(_demo_copy(tmp_path))) == []


def test_fairseq_flags_carry_the_spec_arch() -> None:
    arch = ArchConfig(layers=4, embed_dim=512, ffn_dim=512, heads=8, max_positions=256)
    flags = fairseq_arch_args(arch)
    pairs = dict(zip(flags[::2], flags[1::2], strict=True))
    assert pairs == {
        "--arch": "roberta_base",
        "--encoder-layers": "4",
        "--encoder-embed-dim": "512",
        "--encoder-ffn-embed-dim": "512",
        "--encoder-attention-heads": "8",
        "--max-positions": "256",
        "--activation-fn": "gelu",
    }
    assert position_rows(arch) == 258


def test_table_shows_separators_and_missing_parts() -> None:
    per = {"fairseq": 1234567, "hf": 1234567}
    data = {
        "sweep": "x",
        "vocab_source": "model.arch.vocab_size",
        "arch": {"layers": 1, "embed_dim": 8, "ffn_dim": 8, "heads": 1, "max_positions": 8},
        "vocab_size": 32000,
        "num_classes": 2,
        "components": {"token-type embeddings": {"fairseq": None, "hf": 8}},
        "totals": {k: per for k in ("encoder", "classification head", "LM head", "model")},
        "conventions": [{"name": "weights only", "reports": "000", "count": 22807552, "rule": "r"}],
        "lora": [],
        "heads": {
            "classification head": {"outputs": 2, "output layer": 18, "parameters": 90},
            "LM head": {"outputs": 32000, "output layer": 288000, "parameters": 288088},
        },
    }
    table = format_table(data)
    assert "22,807,552" in table and "1,234,567" in table and "32,000" in table
    assert any(
        line.startswith("token-type embeddings") and " - " in line for line in table.split("\n")
    )
    assert "classification head (fine-tuning): 2-way, output layer 2 x (8 + 1) = 18 of 90" in table
    assert "LM head (pretraining): 32,000-way, output layer 32,000 x (8 + 1) = 288,000" in table


def test_importing_the_models_package_stays_light() -> None:
    code = (
        "import sys, sweeper.models, sweeper.cli.params, sweeper.models.params,"
        " sweeper.models.lora;"
        "heavy = {'torch', 'fairseq', 'transformers', 'peft'} & set(sys.modules);"
        "print(sorted(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
