"""A spec's examples in any `data.format`: texts, class indices and the unlabeled corpus.

This is the one reader preparation, pre-flight and pretraining use, so every check
(missing column, empty text, unknown label, a valid/test label unseen in train with
`labels: auto`, a split value not in `data.splits`, undecodable bytes) happens in the
same place, before anything is written, with the file and line or row of the fault.

Labels are read as text in every format. `data.labels` fixes the class index of each;
`auto` takes the sorted set of the train split's labels, so the mapping depends on the
train data only and is the same on every run over the same data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sweeper.data.errors import DataError
from sweeper.data.rawtext import RawSplit, read_lines
from sweeper.data.table_formats import SUFFIX_FORMATS, Table, normalise, read_table
from sweeper.spec.data_block import DataConfig
from sweeper.spec.schema import SweepSpec

SPLITS = ("train", "valid", "test")
UNLABELED_FILE = "unlabeled.txt"
"""The unlabeled corpus when `data.unlabeled` is unset (generated or supplied)."""


@dataclass(frozen=True)
class LabeledRows:
    """One split as read: normalised texts, label strings, and where each came from."""

    name: str
    texts: Table
    """Locates rows (the text file for `lines`, the table otherwise)."""
    values: list[str]
    second: list[str] | None
    labels: list[str]
    label_origin: Table
    """Locates label faults (the label file for `lines`)."""


def read_examples(spec: SweepSpec) -> tuple[dict[str, RawSplit], list[str]]:
    """Every split as texts and class indices, and the labels (class k is `labels[k]`)."""
    data = spec.data
    rows = (
        {name: _split_rows(data, name) for name in SPLITS}
        if data.format == "lines"
        else (_table_rows(data))
    )
    labels = resolve_labels(data, rows)
    index = {label: k for k, label in enumerate(labels)}
    raw = {}
    for name in SPLITS:
        split = rows[name]
        classes = []
        for i, label in enumerate(split.labels):
            if label not in index:
                allowed = ", ".join(repr(name) for name in labels)
                field = (
                    "data.labels"
                    if data.labels != "auto"
                    else ("data.labels: auto, so not a train label")
                )
                raise split.label_origin.error(
                    i, f"unknown label {label!r}; expected one of {allowed} ({field})"
                )
            classes.append(index[label])
        second = tuple(split.second) if split.second is not None else None
        raw[name] = RawSplit(
            name,
            split.texts.path,
            split.label_origin.path,
            tuple(split.values),
            tuple(classes),
            second,
        )
    return raw, labels


def resolve_labels(data: DataConfig, rows: dict[str, LabeledRows]) -> list[str]:
    """`data.labels`, or with `auto` the sorted set of the train split's labels."""
    if data.labels != "auto":
        return list(data.labels)
    labels = sorted(set(rows["train"].labels))
    if len(labels) < 2:
        raise DataError(
            f"the train split has {len(labels)} distinct label(s) ({labels}); a classifier "
            "needs at least 2 (data.labels: auto)",
            rows["train"].label_origin.path,
        )
    return labels


def _split_rows(data: DataConfig, split: str) -> LabeledRows:
    """`format: lines`: `{stem}.{text_suffix}`, `{stem}.{label_suffix}`, line by line."""
    stem = data.dir / data.splits[split]
    text_path = Path(f"{stem}.{data.text_suffix}")
    label_path = Path(f"{stem}.{data.label_suffix}")
    lines = read_lines(text_path, f"{split} text file")
    texts = Table.of_lines(text_path, lines)
    values = texts.texts("line", "text_suffix")
    label_lines = read_lines(label_path, "label file")
    origin = Table.of_lines(label_path, label_lines)
    if len(label_lines) != len(lines):
        raise DataError(
            f"{len(lines)} lines, but {label_path} has {len(label_lines)}; "
            "text and label files must have one line per review",
            text_path,
        )
    second = None
    if data.text2_suffix is not None:
        text2_path = Path(f"{stem}.{data.text2_suffix}")
        lines2 = read_lines(text2_path, f"{split} text2 file")
        if len(lines2) != len(lines):
            raise DataError(
                f"{len(lines2)} lines, but {text_path} has {len(lines)}; the second texts "
                "of pairs must have one line per example",
                text2_path,
            )
        second = Table.of_lines(text2_path, lines2).texts("line", "text2_suffix")
    return LabeledRows(split, texts, values, second, origin.labels("line", "label_suffix"), origin)


def _table_rows(data: DataConfig) -> dict[str, LabeledRows]:
    """A table format: one table per split (`files`), or one split by `split_field`."""
    if data.files is not None:
        tables = {}
        for split in SPLITS:
            path = data.dir / data.files[split]
            table = read_table(path, data.format)
            if isinstance(table, dict):
                raise DataError("a DatasetDict; `files` needs one Dataset per split", path)
            tables[split] = table
    else:
        assert data.file is not None
        tables = _split_by_column(data, read_table(data.dir / data.file, data.format))
    return {split: _labeled(data, split, table) for split, table in tables.items()}


def _split_by_column(data: DataConfig, table: Table | dict[str, Table]) -> dict[str, Table]:
    """The rows of each split: by the DatasetDict's keys, or by `split_field`'s value."""
    if isinstance(table, dict):
        missing = [stem for stem in data.splits.values() if stem not in table]
        if missing:
            raise DataError(
                f"the DatasetDict has splits {sorted(table)}, not {missing} (data.splits)",
                data.dir / (data.file or ""),
            )
        return {split: table[data.splits[split]] for split in SPLITS}
    split_of = {stem: split for split, stem in data.splits.items()}
    chosen: dict[str, list[int]] = {split: [] for split in SPLITS}
    for index, value in enumerate(table.column(data.split_field, "split_field")):
        name = "" if value is None else str(value).strip()
        if name not in split_of:
            allowed = ", ".join(repr(stem) for stem in data.splits.values())
            raise table.error(index, f"split {name!r} is not one of {allowed} (data.splits)")
        chosen[split_of[name]].append(index)
    for split, indices in chosen.items():
        if not indices:
            raise DataError(f"no row has split {data.splits[split]!r}", table.path)
    return {split: table.select(indices) for split, indices in chosen.items()}


def _labeled(data: DataConfig, split: str, table: Table) -> LabeledRows:
    if len(table) == 0:
        raise DataError(f"the {split} split has no rows", table.path)
    texts = table.texts(data.text_field, "text_field")
    second = table.texts(data.text2_field, "text2_field") if data.text2_field else None
    labels = table.labels(data.label_field, "label_field")
    return LabeledRows(split, table, texts, second, labels, table)


def unlabeled_path(spec: SweepSpec) -> Path | None:
    """The unlabeled corpus the spec reads: `data.unlabeled` when set, else
    `unlabeled.txt` with `model.pretrain`; None when it reads none."""
    if spec.data.unlabeled is not None:
        return spec.data.dir / spec.data.unlabeled
    if spec.model.pretrain is not None:
        return spec.data.dir / UNLABELED_FILE
    return None


def read_unlabeled(spec: SweepSpec) -> tuple[str, ...] | None:
    """The unlabeled corpus, normalised, blank texts dropped; None when none is read.
    Its format follows its name: `.txt` lines, `.jsonl`/`.csv`/`.tsv`/`.parquet` the
    column `data.text_field`, a folder an `hf_disk` Dataset."""
    path = unlabeled_path(spec)
    if path is None:
        return None
    what = "the unlabeled corpus (data.unlabeled; default unlabeled.txt, one sentence per line)"
    if path.is_dir():
        fmt = "hf_disk"
    elif not path.is_file():
        raise DataError(f"{what} not found", path)
    elif path.suffix == ".txt":
        return tuple(s for s in (normalise(line) for line in read_lines(path, what)) if s)
    elif path.suffix in SUFFIX_FORMATS:
        fmt = SUFFIX_FORMATS[path.suffix]
    else:
        raise DataError(
            f"unknown format of {what}: name it .txt, .jsonl, .csv, .tsv or .parquet, or "
            "give an hf_disk folder",
            path,
        )
    table = read_table(path, fmt)
    if isinstance(table, dict):
        raise DataError("a DatasetDict; the unlabeled corpus is one Dataset", path)
    column = table.column(spec.data.text_field, "text_field")
    texts = tuple(normalise(v) for v in column if isinstance(v, str))
    return tuple(t for t in texts if t)
