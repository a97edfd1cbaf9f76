"""Reading tables of examples: JSON Lines, CSV, TSV, Parquet and `datasets` folders.

Each format is read by its own library (`pyarrow.json`, `pyarrow.csv`, `pyarrow.parquet`,
`datasets.load_from_disk`; a `ClassLabel` column is read as its names), imported inside
the function that needs it, into a `Table`: columns of Python values (every CSV/TSV
cell as text) plus where each row came from, so that every fault names its
file and line (JSON Lines: the file line) or row (CSV/TSV, Parquet, `hf_disk`: data rows
counted from 1, a CSV header not counted).

Text files are decoded as UTF-8 first, so an undecodable byte is reported at its line
rather than as the library's unlocated conversion error.

Every text goes through `normalise`: each run of whitespace (newlines, tabs, U+2028 and
every other character `str.split` treats as whitespace) becomes one space, and the ends
are stripped. A multi-line cell is then one line of tokens, identical for every format.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper.data.errors import DataError

TABLE_FORMATS = ("jsonl", "csv", "tsv", "parquet", "hf_disk")
SUFFIX_FORMATS = {".jsonl": "jsonl", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet"}
"""The table format a file's name implies (the unlabeled corpus is read by its name)."""


def normalise(text: str) -> str:
    """The one rule for every text of every format: whitespace runs -> one space, ends
    stripped."""
    return " ".join(text.split())


@dataclass(frozen=True)
class Table:
    """A table's columns (equal lengths) and where each row came from: its file line
    (`lines`, JSON Lines), else its 1-based row number (`rows`; None: 1, 2, ...)."""

    path: Path
    columns: dict[str, list[Any]]
    lines: list[int] | None = None
    rows: list[int] | None = None
    line_file: bool = False
    """A line file's one column (`format: lines`): messages name no column."""

    @classmethod
    def of_lines(cls, path: Path, lines: list[str]) -> Table:
        """The lines of a line file as a one-column table, each row located at its line."""
        return cls(path, {"line": lines}, lines=list(range(1, len(lines) + 1)), line_file=True)

    def _in(self, name: str) -> str:
        return "" if self.line_file else f" in column {name!r}"

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()), []))

    def error(self, index: int, message: str) -> DataError:
        """A DataError located at row `index` (0-based) of this table."""
        if self.lines is not None:
            return DataError(message, self.path, self.lines[index])
        return DataError(message, self.path, row=self.rows[index] if self.rows else index + 1)

    def column(self, name: str, field: str) -> list[Any]:
        """The column `name`; a missing one names the columns present and the field."""
        if name not in self.columns:
            present = ", ".join(repr(c) for c in self.columns) or "none"
            raise DataError(
                f"no column {name!r} (data.{field}); the columns are {present}", self.path
            )
        return self.columns[name]

    def texts(self, name: str, field: str) -> list[str]:
        """Column `name` as normalised texts; an empty or missing text is an error."""
        texts = []
        for index, value in enumerate(self.column(name, field)):
            if not isinstance(value, str) and value is not None:
                raise self.error(index, f"{name!r} is {type(value).__name__} {value!r}, not text")
            text = normalise(value or "")
            if not text:
                raise self.error(index, f"empty text{self._in(name)}")
            texts.append(text)
        return texts

    def labels(self, name: str, field: str) -> list[str]:
        """Column `name` as label strings (an integer 2 is the label `2`)."""
        labels = []
        for index, value in enumerate(self.column(name, field)):
            label = "" if value is None else str(value).strip()
            if not label:
                raise self.error(index, f"empty label{self._in(name)}")
            labels.append(label)
        return labels

    def select(self, indices: list[int]) -> Table:
        """The rows at `indices`, each keeping its location in this table."""
        columns = {name: [values[i] for i in indices] for name, values in self.columns.items()}
        if self.lines is not None:
            return Table(self.path, columns, lines=[self.lines[i] for i in indices])
        numbers = self.rows or list(range(1, len(self) + 1))
        return Table(self.path, columns, rows=[numbers[i] for i in indices])


def read_table(path: Path, fmt: str) -> Table | dict[str, Table]:
    """Read `path` in format `fmt`; `hf_disk` gives a dict for a saved DatasetDict."""
    if fmt == "hf_disk":
        return _read_hf_disk(path)
    if not path.is_file():
        raise DataError(f"file not found (expected {fmt})", path)
    if fmt == "parquet":
        return _read_parquet(path)
    raw = path.read_bytes()
    _check_utf8(path, raw)
    if fmt == "jsonl":
        return _read_jsonl(path, raw)
    return _read_csv(path, "," if fmt == "csv" else "\t")


def _check_utf8(path: Path, raw: bytes) -> None:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        bad = raw[exc.start : exc.start + 1].hex()
        raise DataError(f"not valid UTF-8 (byte 0x{bad} at column {column})", path, line) from None


def _from_arrow(path: Path, table: Any, lines: list[int] | None = None) -> Table:
    return Table(path, {name: table.column(name).to_pylist() for name in table.column_names}, lines)


def _read_jsonl(path: Path, raw: bytes) -> Table:
    import pyarrow as pa
    import pyarrow.json as pj

    lines = [n for n, chunk in enumerate(raw.split(b"\n"), start=1) if chunk.strip()]
    if not lines:
        raise DataError("file is empty", path)
    try:
        table = pj.read_json(path, read_options=pj.ReadOptions(block_size=max(1 << 20, len(raw))))
    except pa.ArrowInvalid as exc:
        raise _locate_json_fault(path, raw) or DataError(f"not JSON Lines ({exc})", path) from None
    return _from_arrow(path, table, lines)


def _locate_json_fault(path: Path, raw: bytes) -> DataError | None:
    """The line pyarrow refused: not a JSON object, or a field whose type changed."""
    kinds: dict[str, tuple[str, int]] = {}
    for number, chunk in enumerate(raw.split(b"\n"), start=1):
        if not chunk.strip():
            continue
        try:
            row = json.loads(chunk)
        except ValueError as exc:
            return DataError(f"not valid JSON ({exc})", path, number)
        if not isinstance(row, dict):
            return DataError(
                f"expected a JSON object per line, got {type(row).__name__}", path, number
            )
        for key, value in row.items():
            kind = _json_kind(value)
            first = kinds.setdefault(key, (kind, number))
            if value is not None and first[0] != kind and first[0] != "NoneType":
                return DataError(
                    f"{key!r} is {kind} here but {first[0]} on line {first[1]}: a column needs "
                    'one type (quote labels such as "2" everywhere, or nowhere)',
                    path,
                    number,
                )
            if first[0] == "NoneType":
                kinds[key] = (kind, number)
    return None


def _json_kind(value: Any) -> str:
    """What pyarrow infers a JSON value as (integers and floats share a number column)."""
    if isinstance(value, str):
        return "text"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "number"
    return type(value).__name__


def _read_csv(path: Path, delimiter: str) -> Table:
    import pyarrow as pa
    import pyarrow.csv as pc

    with path.open("rb") as head:  # every column is text: "01" stays "01", "true" "true"
        line = head.readline().decode("utf-8").removeprefix("\ufeff").rstrip("\r\n")
    strings = {name: pa.string() for name in next(csv.reader([line], delimiter=delimiter))}
    try:
        table = pc.read_csv(
            path,
            parse_options=pc.ParseOptions(delimiter=delimiter, newlines_in_values=True),
            convert_options=pc.ConvertOptions(column_types=strings, strings_can_be_null=False),
        )
    except pa.ArrowInvalid as exc:
        raise DataError(
            f"not a readable {'CSV' if delimiter == ',' else 'TSV'} table ({exc})", path
        ) from None
    if table.num_rows == 0:
        raise DataError("no rows after the header", path)
    return _from_arrow(path, table)


def _read_parquet(path: Path) -> Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"not a Parquet file ({exc})", path) from None
    return _from_arrow(path, table)


def _read_hf_disk(path: Path) -> Table | dict[str, Table]:
    if not path.is_dir():
        raise DataError("folder not found (expected a `datasets` save_to_disk folder)", path)
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise DataError(f"not a `datasets` save_to_disk folder ({exc})", path) from None
    if isinstance(loaded, datasets.DatasetDict):
        return {name: _hf_table(path / name, ds) for name, ds in loaded.items()}
    return _hf_table(path, loaded)


def _hf_table(path: Path, dataset: Any) -> Table:
    """A Dataset's rows; a `ClassLabel` column gives each row's label name, not its int."""
    import datasets

    table = _from_arrow(path, dataset.with_format("arrow")[:])
    for name, feature in dataset.features.items():
        if isinstance(feature, datasets.ClassLabel):
            table.columns[name] = [
                None if v is None else feature.int2str(v) for v in table.columns[name]
            ]
    return table
