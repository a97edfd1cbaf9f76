"""`sweeper fixture lab-size`: the padded dictionary and the overrides it prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.cli.fixture import overrides, pad_dictionary
from sweeper.data.vocab import model_vocab_size


def test_the_dictionary_is_padded_to_the_labs_rows(tmp_path):
    source = tmp_path / "dict.txt"
    source.write_text("▁le 120\n▁livre 40\n")
    entries = pad_dictionary(source, tmp_path / "padded.txt", 32000)
    lines = (tmp_path / "padded.txt").read_text().splitlines()
    assert entries == len(lines) == 31995 and model_vocab_size(entries) == 32000
    assert lines[:3] == ["▁le 120", "▁livre 40", "madeupword0000 0"]
    assert lines[-1] == "madeupword31992 0"


def test_a_dictionary_too_big_for_the_rows_is_refused(tmp_path):
    source = tmp_path / "dict.txt"
    source.write_text("".join(f"p{i} 1\n" for i in range(10)))
    with pytest.raises(SystemExit) as exc:
        pad_dictionary(source, tmp_path / "padded.txt", 12)
    assert exc.value.code == 2


def test_overrides_point_roberta_yaml_at_the_fixture():
    found = dict(item.split("=", 1) for item in overrides(Path("/lab")))
    assert found == {
        "data.dir": "/lab/data/cls-books",
        "model.sentencepiece": "/lab/models/roberta-small-fr/sentencepiece.bpe.model",
        "model.dictionary": "/lab/models/roberta-small-fr/dict.txt",
        "model.checkpoint": "/lab/models/roberta-small-fr/model.pt",
    }
