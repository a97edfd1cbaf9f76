"""Your own data: every `data.format`, `labels: auto`, a tokenizer trained from the data.

One small 3-class data set with multi-line texts is written in each format; each is
prepared with `model.tokenizer.train` and `labels: auto`, and must give fairseq and HF
the same ids for every example, and every format the same ids as every other (the
texts are the same once normalised). Bad inputs exit 2 naming file and line or row,
with nothing created.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweeper.cli.main import main
from sweeper.data import DataError, PreparedData, prepare
from sweeper.data.examples import read_examples, read_unlabeled
from sweeper.data.table_formats import normalise
from sweeper.spec.load import load_spec

SPLITS = ("train", "valid", "test")
WORDS = [
    "le",
    "livre",
    "roman",
    "style",
    "histoire",
    "auteur",
    "page",
    "fin",
    "début",
    "personnage",
    "lecture",
    "plume",
]
LABELS = ("neutre", "négatif", "positif")


def examples(split: str) -> list[dict[str, Any]]:
    """Deterministic rows: multi-line texts (newline, tab, U+2028), 3 string labels."""
    count = {"train": 12, "valid": 6, "test": 6}[split]
    offset = {"train": 0, "valid": 50, "test": 90}[split]
    rows = []
    for i in range(count):
        k = offset + i
        words = [WORDS[(k * 7 + j * 3) % len(WORDS)] for j in range(4 + k % 5)]
        text = " ".join(words[:2]) + "\n" + "\t".join(words[2:4]) + "\u2028" + " ".join(words[4:])
        rows.append({"text": text, "label": LABELS[k % 3]})
    return rows


UNLABELED = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))]


def write_table(path: Path, fmt: str, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa

    columns = {key: [row[key] for row in rows] for key in rows[0]}
    if fmt == "jsonl":
        lines = [json.dumps(row, ensure_ascii=False) for row in rows]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif fmt in ("csv", "tsv"):
        import pyarrow.csv as pc

        delimiter = "," if fmt == "csv" else "\t"
        pc.write_csv(pa.table(columns), path, pc.WriteOptions(delimiter=delimiter))
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(pa.table(columns), path)
    else:
        raise AssertionError(fmt)


def write_hf_disk(path: Path, per_split: dict[str, list[dict[str, Any]]] | None, rows=None) -> None:
    datasets = pytest.importorskip("datasets")
    if per_split is not None:
        parts = {
            split: datasets.Dataset.from_list(split_rows) for split, split_rows in per_split.items()
        }
        datasets.DatasetDict(parts).save_to_disk(str(path))
    else:
        datasets.Dataset.from_list(rows).save_to_disk(str(path))


def write_spec(tmp_path: Path, data: dict[str, Any], **model: Any) -> Path:
    spec = {
        "name": "own",
        "output_dir": "out",
        "data": {"dir": "data", "labels": "auto", **data},
        "model": {
            "arch": {"layers": 1, "embed_dim": 16, "ffn_dim": 16, "heads": 2, "max_positions": 32},
            "tokenizer": {"train": {"vocab_size": 60}},
            **model,
        },
        "train": {"num_classes": 3},
        "grid": {"init": ["random"]},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    return path


def dataset(tmp_path: Path, fmt: str) -> Path:
    """The data set in `fmt` under tmp_path/data, and its spec."""
    data = tmp_path / "data"
    data.mkdir(parents=True, exist_ok=True)
    per_split = {split: examples(split) for split in SPLITS}
    if fmt == "hf_disk":
        write_hf_disk(data / "ds", per_split)
        return write_spec(tmp_path, {"format": "hf_disk", "file": "ds"})
    if fmt == "hf_disk_files":  # one Dataset folder per split
        for split in SPLITS:
            write_hf_disk(data / f"ds-{split}", None, per_split[split])
        files = {split: f"ds-{split}" for split in SPLITS}
        return write_spec(tmp_path, {"format": "hf_disk", "files": files})
    if fmt == "one_file":  # one CSV, the split in a column
        rows = [{**row, "split": split} for split in SPLITS for row in per_split[split]]
        write_table(data / "all.csv", "csv", rows)
        return write_spec(tmp_path, {"format": "csv", "file": "all.csv"})
    if fmt == "hf_disk_one":  # one Dataset, the split in a column
        rows = [{**row, "split": split} for split in SPLITS for row in per_split[split]]
        write_hf_disk(data / "ds", None, rows)
        return write_spec(tmp_path, {"format": "hf_disk", "file": "ds"})
    for split in SPLITS:
        write_table(data / f"{split}.{fmt}", fmt, per_split[split])
    files = {split: f"{split}.{fmt}" for split in SPLITS}
    return write_spec(tmp_path, {"format": fmt, "files": files})


FORMATS = ("jsonl", "csv", "tsv", "parquet", "hf_disk", "hf_disk_files", "one_file", "hf_disk_one")


def test_every_format_reads_the_same_normalised_examples(tmp_path) -> None:
    expected = {s: [normalise(r["text"]) for r in examples(s)] for s in SPLITS}
    assert "\n" not in expected["train"][0] and "  " not in expected["train"][0]
    for fmt in FORMATS:
        spec = load_spec(dataset(tmp_path / fmt, fmt))
        raw, labels = read_examples(spec)
        assert labels == sorted(LABELS), fmt
        for split in SPLITS:
            assert list(raw[split].texts) == expected[split], (fmt, split)
            want = [labels.index(r["label"]) for r in examples(split)]
            assert list(raw[split].labels) == want, (fmt, split)


def test_csv_multi_line_quoted_cell(tmp_path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for split in SPLITS:
        (data / f"{split}.csv").write_text(
            'text,label\n"first line\nsecond, quoted ""line""",a\nsingle,b\n', encoding="utf-8"
        )
    spec = write_spec(tmp_path, {"format": "csv", "files": {s: f"{s}.csv" for s in SPLITS}})
    raw, labels = read_examples(load_spec(spec))
    assert raw["test"].texts == ('first line second, quoted "line"', "single")
    assert labels == ["a", "b"] and raw["train"].labels == (0, 1)


def test_integer_labels_are_read_as_text(tmp_path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for split in SPLITS:
        rows = [{"text": f"texte {i}", "label": i % 3} for i in range(6)]
        write_table(data / f"{split}.jsonl", "jsonl", rows)
    spec = write_spec(tmp_path, {"format": "jsonl", "files": {s: f"{s}.jsonl" for s in SPLITS}})
    _, labels = read_examples(load_spec(spec))
    assert labels == ["0", "1", "2"]


def fairseq_and_hf(data: PreparedData, split: str) -> tuple[list[list[int]], list[dict]]:
    from fairseq.data import Dictionary, data_utils

    dictionary = Dictionary.load(str(data.fairseq_dir / "input0" / "dict.txt"))
    labels = Dictionary.load(str(data.fairseq_dir / "label" / "dict.txt"))
    inputs = data_utils.load_indexed_dataset(str(data.fairseq_dir / "input0" / split), dictionary)
    targets = data_utils.load_indexed_dataset(str(data.fairseq_dir / "label" / split), labels)
    rows = [json.loads(line) for line in data.hf_file(split).read_text().splitlines()]
    assert len(inputs) == len(targets) == len(rows)
    fairseq = []
    for i, row in enumerate(rows):
        assert labels[targets[i][0].item()] == data.labels[row["label"]], i
        fairseq.append([0, *inputs[i].tolist()])
    return fairseq, rows


def test_fairseq_and_hf_ids_identical_for_every_format_and_tokenizer_reused(tmp_path) -> None:
    """Every format: fairseq ids == HF ids for every example; all formats give the same
    ids; the tokenizer is trained once and then a cache hit (same text, same settings)."""
    pytest.importorskip("fairseq")
    output = tmp_path / "shared-out"
    reference = None
    for number, fmt in enumerate(FORMATS):
        spec = load_spec(dataset(tmp_path / fmt, fmt), [f"output_dir={output}"])
        messages: list[str] = []
        data = prepare(spec, log=messages.append)
        trained = [m for m in messages if m.startswith("tokenizer: training")]
        hits = [m for m in messages if m.startswith("tokenizer: cache hit")]
        assert (len(trained), len(hits)) == ((1, 0) if number == 0 else (0, 1)), (fmt, messages)
        assert data.labels == tuple(sorted(LABELS)) and data.num_classes == 3
        ids = {}
        for split in SPLITS:
            fairseq, rows = fairseq_and_hf(data, split)
            assert fairseq == [row["input_ids"] for row in rows], (fmt, split)
            ids[split] = [(row["input_ids"], row["label"]) for row in rows]
        reference = reference or ids
        assert ids == reference, fmt
    (folder,) = (output / "tokenizer").iterdir()
    assert (folder / "dict.txt").is_file() and (folder / "sentencepiece.model").is_file()


def test_second_prepare_reuses_the_trained_tokenizer(tmp_path, capfd) -> None:
    pytest.importorskip("fairseq")
    spec_path = dataset(tmp_path, "jsonl")
    assert main(["prepare", str(spec_path)]) == 0
    first = capfd.readouterr().out
    assert "tokenizer: training sentencepiece bpe" in first
    (folder,) = (tmp_path / "out" / "tokenizer").iterdir()
    stamp = (folder / "dict.txt").stat().st_mtime_ns
    # another max_positions: a new prepared folder, the same tokenizer
    assert main(["prepare", str(spec_path), "model.arch.max_positions=24"]) == 0
    second = capfd.readouterr().out
    assert f"tokenizer: cache hit {folder.name}" in second and "training" not in second
    assert (folder / "dict.txt").stat().st_mtime_ns == stamp
    assert len(list((tmp_path / "out" / "prepared").iterdir())) == 2
    manifest = json.loads(next((tmp_path / "out" / "prepared").glob("*/prepared.json")).read_text())
    assert manifest["tokenizer"] == folder.name and manifest["labels"] == sorted(LABELS)


def test_the_dict_is_fairseq_preprocess_s(tmp_path) -> None:
    """dict.txt is fairseq's Dictionary of the encoded train text: by count, padded to 8."""
    pytest.importorskip("fairseq")
    spec = load_spec(dataset(tmp_path, "jsonl"))
    prepare(spec, log=lambda _: None)
    (folder,) = (spec.output_dir / "tokenizer").iterdir()
    lines = (folder / "dict.txt").read_text(encoding="utf-8").splitlines()
    counts = [int(line.rsplit(" ", 1)[1]) for line in lines]
    real = [c for line, c in zip(lines, counts, strict=True) if not line.startswith("madeupword")]
    assert real == sorted(real, reverse=True) and (4 + len(lines)) % 8 == 0


def test_unlabeled_corpus_in_any_format(tmp_path) -> None:
    spec_path = dataset(tmp_path, "jsonl")
    data = tmp_path / "data"
    write_table(data / "unlabeled.jsonl", "jsonl", [{"text": t + "\n"} for t in UNLABELED])
    write_table(data / "unlabeled.parquet", "parquet", [{"text": t} for t in UNLABELED])
    (data / "unlabeled.txt").write_text("\n".join(UNLABELED) + "\n\n", encoding="utf-8")
    for name in ("unlabeled.jsonl", "unlabeled.parquet", "unlabeled.txt"):
        spec = load_spec(spec_path, [f"data.unlabeled={name}"])
        assert read_unlabeled(spec) == tuple(UNLABELED), name
    assert read_unlabeled(load_spec(spec_path)) is None  # no pretrain, no data.unlabeled


def test_pretraining_reads_the_unlabeled_jsonl(tmp_path) -> None:
    pytest.importorskip("fairseq")
    spec_path = dataset(tmp_path, "jsonl")
    write_table(tmp_path / "data/unlabeled.jsonl", "jsonl", [{"text": t} for t in UNLABELED * 3])
    spec = load_spec(spec_path, ["data.unlabeled=unlabeled.jsonl", "model.pretrain={steps: 1}"])
    data = prepare(spec, log=lambda _: None)
    assert data.pretrain_dir is not None and (data.pretrain_dir / "train.bin").is_file()
    assert data.stats["pretrain"]["train"]["sentences"] + data.stats["pretrain"]["valid"][
        "sentences"
    ] == 3 * len(UNLABELED)


# --- bad input: exit 2, `error: FILE:LINE|row N: ...`, nothing created -------------------


def break_and_run(tmp_path: Path, fmt: str, capsys, *overrides: str) -> str:
    spec = tmp_path / "spec.yaml"
    assert main(["prepare", str(spec), *overrides]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: "), err
    assert not (tmp_path / "out").exists(), "nothing may be created on bad input"
    return err.strip().removeprefix("error: ")


def test_missing_column_names_the_columns_present(tmp_path, capsys) -> None:
    dataset(tmp_path, "parquet")
    err = break_and_run(tmp_path, "parquet", capsys, "data.label_field=class")
    assert err.startswith(f"{tmp_path / 'data/train.parquet'}: no column 'class'")
    assert "'text', 'label'" in err


def test_empty_text_names_the_row(tmp_path, capsys) -> None:
    dataset(tmp_path, "csv")
    rows = examples("valid")
    rows[3]["text"] = " \n\t"
    write_table(tmp_path / "data/valid.csv", "csv", rows)
    err = break_and_run(tmp_path, "csv", capsys)
    assert err.startswith(f"{tmp_path / 'data/valid.csv'}:row 4: empty text in column 'text'")


def test_unknown_label_with_an_explicit_list(tmp_path, capsys) -> None:
    dataset(tmp_path, "jsonl")
    err = break_and_run(tmp_path, "jsonl", capsys, 'data.labels=["négatif", "positif"]')
    assert err.startswith(f"{tmp_path / 'data/train.jsonl'}:1: unknown label 'neutre'")


def test_valid_label_unseen_in_train(tmp_path, capsys) -> None:
    dataset(tmp_path, "jsonl")
    rows = examples("test")
    rows[4]["label"] = "mitigé"
    write_table(tmp_path / "data/test.jsonl", "jsonl", rows)
    err = break_and_run(tmp_path, "jsonl", capsys)
    assert err.startswith(f"{tmp_path / 'data/test.jsonl'}:5: unknown label 'mitigé'")
    assert "(data.labels: auto, so not a train label)" in err


def test_undecodable_bytes_name_the_line(tmp_path, capsys) -> None:
    dataset(tmp_path, "jsonl")
    path = tmp_path / "data/valid.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"text": "', b'"text": "\xff', 1)
    path.write_bytes(b"\n".join(lines))
    err = break_and_run(tmp_path, "jsonl", capsys)
    assert err.startswith(f"{path}:3: not valid UTF-8 (byte 0xff")


def test_split_value_not_in_splits(tmp_path, capsys) -> None:
    dataset(tmp_path, "one_file")
    path = tmp_path / "data/all.csv"
    rows = [{**row, "split": split} for split in SPLITS for row in examples(split)]
    rows[13]["split"] = "dev"
    write_table(path, "csv", rows)
    err = break_and_run(tmp_path, "csv", capsys)
    assert err.startswith(f"{path}:row 14: split 'dev' is not one of 'train', 'valid', 'test'")


def test_a_column_of_mixed_json_types_names_the_line(tmp_path, capsys) -> None:
    dataset(tmp_path, "jsonl")
    path = tmp_path / "data/train.jsonl"
    rows = examples("train")
    rows[5]["label"] = 7
    write_table(path, "jsonl", rows)
    err = break_and_run(tmp_path, "jsonl", capsys)
    assert err.startswith(f"{path}:6: 'label' is number here but text on line 1")


def test_data_error_row_format() -> None:
    assert str(DataError("bad", Path("a.csv"), row=3)) == "a.csv:row 3: bad"


@pytest.mark.parametrize(
    "model, words",
    [
        ({"sentencepiece": "sp.model"}, "give either `tokenizer.train` or the files"),
        ({"tokenizer": None}, "give `sentencepiece` and `dictionary`"),
    ],
)
def test_tokenizer_and_files_together_is_a_spec_error(tmp_path, capsys, model, words) -> None:
    spec = dataset(tmp_path, "jsonl")
    raw = yaml.safe_load(spec.read_text(encoding="utf-8"))
    raw["model"].update(model)
    raw["model"] = {k: v for k, v in raw["model"].items() if v is not None}
    spec.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    assert main(["validate", str(spec)]) == 2
    assert words in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["prepare", str(spec)])
    assert info.value.code == 2
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "data, words",
    [
        ({"format": "jsonl"}, "needs either `files`"),
        ({"format": "lines", "file": "all.csv"}, "`files`/`file` need a table format"),
        ({"format": "csv", "file": "a.csv", "text_field": "split"}, "fields must differ"),
    ],
)
def test_table_spec_errors(tmp_path, capsys, data, words) -> None:
    spec = write_spec(tmp_path, data)
    assert main(["validate", str(spec)]) == 2
    assert words in capsys.readouterr().err


def test_num_classes_defaults_to_an_explicit_label_list(tmp_path) -> None:
    spec_path = dataset(tmp_path, "jsonl")
    raw = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    del raw["train"]
    spec_path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    listed = load_spec(spec_path, ['data.labels=["neutre", "négatif", "positif"]'])
    assert listed.train.num_classes == 3
    assert load_spec(spec_path, ["train.num_classes=5"]).train.num_classes == 5
    assert load_spec(spec_path).train.num_classes == 2  # auto: known once the data is read


def test_auto_labels_beyond_num_classes_stop_preflight(tmp_path) -> None:
    from sweeper.engine.preflight import preflight

    spec = load_spec(dataset(tmp_path, "jsonl"), ["train.num_classes=2"])
    (problem,) = preflight(spec)
    assert "train.num_classes is 2, but the labels have 3 classes" in problem
    assert "set train.num_classes to at least 3" in problem
    assert preflight(load_spec(dataset(tmp_path / "ok", "jsonl"))) == []
    assert not (tmp_path / "out").exists()


def test_pairs_from_text2_field(tmp_path) -> None:
    pytest.importorskip("fairseq")
    data = tmp_path / "data"
    data.mkdir()
    for split in SPLITS:
        rows = [{**row, "second": row["text"][::-1]} for row in examples(split)]
        write_table(data / f"{split}.jsonl", "jsonl", rows)
    files = {s: f"{s}.jsonl" for s in SPLITS}
    spec_path = write_spec(tmp_path, {"format": "jsonl", "files": files, "text2_field": "second"})
    spec = load_spec(spec_path)
    raw, _ = read_examples(spec)
    assert raw["valid"].texts2 == tuple(normalise(r["text"][::-1]) for r in examples("valid"))
    prepared = prepare(spec, log=lambda _: None)
    assert prepared.stats["pairs"] and (prepared.fairseq_dir / "input1" / "test.bin").is_file()


def test_class_label_names_and_csv_cells_stay_text(tmp_path) -> None:
    datasets = pytest.importorskip("datasets")
    data = tmp_path / "data"
    data.mkdir()
    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=list(LABELS))}
    )
    parts = {
        split: datasets.Dataset.from_dict(
            {"text": [f"texte {i}" for i in range(6)], "label": [i % 3 for i in range(6)]},
            features=features,
        )
        for split in SPLITS
    }
    datasets.DatasetDict(parts).save_to_disk(str(data / "ds"))
    _, labels = read_examples(load_spec(write_spec(tmp_path, {"format": "hf_disk", "file": "ds"})))
    assert labels == sorted(LABELS)
    for split in SPLITS:
        (data / f"{split}.csv").write_text("text,label\nun,01\ndeux,true\n", encoding="utf-8")
    files = {s: f"{s}.csv" for s in SPLITS}
    _, labels = read_examples(load_spec(write_spec(tmp_path, {"format": "csv", "files": files})))
    assert labels == ["01", "true"]
