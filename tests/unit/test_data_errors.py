"""Bad data fails clearly: a DataError naming file (and line), exit 2, nothing prepared.

These run without fairseq: every check happens before any heavy import, which is
also what guarantees that nothing is written when the input is bad.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.cli.main import main
from sweeper.data import DataError, prepare
from sweeper.data.examples import read_examples
from sweeper.data.vocab import check_dict
from sweeper.spec.load import load_spec

REPO = Path(__file__).resolve().parents[2]
GOOD_REVIEWS = "un livre superbe .\nun roman plat .\nle style est fade .\n"
GOOD_LABELS = "1\n0\n0\n"


def write_files_spec(tmp_path: Path, model_extra: str = "") -> Path:
    """A `source: files` spec over a tiny valid data set; tests then break one file."""
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "valid", "test"):
        (data / f"{split}.review").write_text(GOOD_REVIEWS, encoding="utf-8")
        (data / f"{split}.label").write_text(GOOD_LABELS, encoding="utf-8")
    (data / "sentencepiece.bpe.model").write_bytes(b"not checked before the raw files")
    (data / "dict.txt").write_text("▁un 3\n▁livre 2\n", encoding="utf-8")
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: bad\noutput_dir: out\n"
        "data: {source: files, dir: data}\n"
        "model:\n"
        "  arch: {layers: 1, embed_dim: 16, ffn_dim: 16, heads: 2, max_positions: 16}\n"
        "  sentencepiece: data/sentencepiece.bpe.model\n"
        "  dictionary: data/dict.txt\n"
        f"{model_extra}"
        "grid: {init: [random]}\n",
        encoding="utf-8",
    )
    return spec


def prepare_error(spec_path: Path) -> str:
    """The DataError message of preparing `spec_path`; asserts nothing was prepared."""
    spec = load_spec(spec_path)
    with pytest.raises(DataError) as info:
        prepare(spec, log=lambda _: None)
    assert not (spec.output_dir / "prepared").exists()
    return str(info.value)


def test_line_counts_differ_names_both_files(tmp_path) -> None:
    spec = write_files_spec(tmp_path)
    (tmp_path / "data/valid.label").write_text("1\n0\n", encoding="utf-8")
    message = prepare_error(spec)
    assert "valid.review" in message and "valid.label has 2" in message and "3 lines" in message


def test_unknown_label_names_file_and_line(tmp_path) -> None:
    spec = write_files_spec(tmp_path)
    (tmp_path / "data/test.label").write_text("1\npositive\n0\n", encoding="utf-8")
    message = prepare_error(spec)
    assert f"{tmp_path / 'data/test.label'}:2: unknown label 'positive'" in message
    assert "'0', '1'" in message


def test_empty_file(tmp_path) -> None:
    spec = write_files_spec(tmp_path)
    (tmp_path / "data/train.review").write_text("", encoding="utf-8")
    assert prepare_error(spec) == f"{tmp_path / 'data/train.review'}: train text file is empty"


def test_undecodable_bytes_name_the_line(tmp_path) -> None:
    spec = write_files_spec(tmp_path)
    (tmp_path / "data/train.review").write_bytes(b"ok\nun livre \xe9crit\nfin\n")
    message = prepare_error(spec)
    assert message.startswith(f"{tmp_path / 'data/train.review'}:2: not valid UTF-8")
    assert "0xe9" in message


@pytest.mark.parametrize("missing", ["valid.review", "test.label"])
def test_missing_split_file(tmp_path, missing) -> None:
    spec = write_files_spec(tmp_path)
    (tmp_path / "data" / missing).unlink()
    assert prepare_error(spec).startswith(f"{tmp_path / 'data' / missing}: ")
    assert "split file not found" in prepare_error(spec)


@pytest.mark.parametrize(
    ("name", "field"),
    [("sentencepiece.bpe.model", "model.sentencepiece"), ("dict.txt", "model.dictionary")],
)
def test_missing_sentencepiece_model_or_dict(tmp_path, name, field) -> None:
    spec = write_files_spec(tmp_path)
    (tmp_path / "data" / name).unlink()
    message = prepare_error(spec)
    assert message.startswith(f"{tmp_path / 'data' / name}: ") and field in message


def test_corrupt_sentencepiece_model(tmp_path) -> None:
    spec = write_files_spec(tmp_path)
    message = prepare_error(spec)
    assert message.startswith(f"{tmp_path / 'data/sentencepiece.bpe.model'}: not a sentencepiece")


def test_pretrain_without_unlabeled_corpus(tmp_path) -> None:
    spec_path = write_files_spec(tmp_path, model_extra="  pretrain: {steps: 2}\n")
    message = prepare_error(spec_path)
    assert message.startswith(f"{tmp_path / 'data/unlabeled.txt'}: model.pretrain needs")


@pytest.mark.parametrize(
    ("content", "line", "expected"),
    [
        ("▁a 1\n▁b\n".encode(), 2, "expected '<symbol> <count>'"),
        ("▁a 1\n▁b x\n".encode(), 2, "expected '<symbol> <count>'"),
        ("▁a 1\n\n▁b 2\n".encode(), 2, "empty line"),
        ("▁a 1\n▁b 2\n▁a 5\n".encode(), 3, "duplicate symbol '▁a'"),
        ("<unk> 1\n▁b 2\n".encode(), 1, "built-in specials"),
        (b"a 1\n\xff 2\n", 2, "not valid UTF-8"),
    ],
)
def test_malformed_dict_names_the_line(tmp_path, content, line, expected) -> None:
    path = tmp_path / "dict.txt"
    path.write_bytes(content)
    with pytest.raises(DataError) as info:
        check_dict(path)
    assert str(info.value).startswith(f"{path}:{line}: ") and expected in str(info.value)


def test_well_formed_dict_with_overwrite_flag(tmp_path) -> None:
    path = tmp_path / "dict.txt"
    path.write_text("▁a 1\n▁b 0\n▁a 7 #fairseq:overwrite\nhas space 3\n", encoding="utf-8")
    assert check_dict(path) == ["▁a", "▁b", "has space"]


def test_lines_accept_crlf_and_never_split_on_unicode_line_separators(tmp_path) -> None:
    """U+2028 inside a review does not start a new line (text and labels stay aligned);
    like every whitespace run, the normalisation rule makes it one space."""
    spec = write_files_spec(tmp_path)
    (tmp_path / "data/train.review").write_bytes("un\u2028livre\r\nsuperbe\r\n".encode())
    (tmp_path / "data/train.label").write_bytes(b"1\r\n0 \r\n")
    raw, labels = read_examples(load_spec(spec))
    assert raw["train"].texts == ("un livre", "superbe") and raw["train"].labels == (1, 0)
    assert labels == ["0", "1"]


def test_cli_reports_error_and_exits_2(tmp_path, capsys) -> None:
    spec = write_files_spec(tmp_path)
    (tmp_path / "data/valid.label").write_text("1\n0\n2\n", encoding="utf-8")
    assert main(["prepare", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'data/valid.label'}:3: unknown label '2'")
    assert not (tmp_path / "out" / "prepared").exists()


def test_cli_bad_spec_exits_2(tmp_path, capsys) -> None:
    spec = write_files_spec(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["prepare", str(spec), "data.labels=[]"])
    assert info.value.code == 2
    assert "data.labels" in capsys.readouterr().err


def test_prepare_help_teaches_usage(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["prepare", "--help"])
    out = capsys.readouterr().out
    assert "sweeper prepare sweeps/demo.yaml" in out and "cached: <path>" in out
    assert (REPO / "sweeps/demo.yaml").is_file()


def test_an_empty_review_line_names_its_line(tmp_path) -> None:
    spec = write_files_spec(tmp_path)
    (tmp_path / "data/test.review").write_text("un livre .\n \t\nle style .\n", encoding="utf-8")
    message = prepare_error(spec)
    assert message == f"{tmp_path / 'data/test.review'}:2: empty text"
