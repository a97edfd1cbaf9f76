"""Reading the raw splits: one review per line, one label per line, strictly aligned.

Lines are split on `\\n` only (as fairseq's line readers do), never with
`str.splitlines`, which also breaks on characters such as U+2028 that can occur inside
a review and would silently misalign text and labels. Every fault names file and line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sweeper.data.errors import DataError


@dataclass(frozen=True)
class RawSplit:
    """A split's texts and class indices (position in `data.labels`), aligned."""

    name: str
    text_path: Path
    label_path: Path
    texts: tuple[str, ...]
    labels: tuple[int, ...]
    texts2: tuple[str, ...] | None = None
    """Each pair's second text (`data.text2_suffix`); None for single texts."""


def read_lines(path: Path, what: str) -> list[str]:
    """Decode `path` line by line; missing, empty or non-UTF-8 files are DataErrors."""
    if not path.is_file():
        raise DataError(f"{what} not found", path)
    raw = path.read_bytes()
    if not raw.strip():
        raise DataError(f"{what} is empty", path)
    chunks = raw.split(b"\n")
    if chunks[-1] == b"":
        chunks.pop()  # the final newline ends the last line; it does not start a new one
    lines = []
    for number, chunk in enumerate(chunks, start=1):
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = chunk[exc.start : exc.start + 1].hex()
            raise DataError(
                f"not valid UTF-8 (byte 0x{bad} at column {exc.start + 1})", path, number
            ) from None
        lines.append(text.removesuffix("\r"))
    return lines


def read_labels(path: Path, labels: list[str] | tuple[str, ...]) -> list[int]:
    """Class index of each line; an unknown label names its line and the allowed ones."""
    index = {name: i for i, name in enumerate(labels)}
    classes = []
    for number, line in enumerate(read_lines(path, "label file"), start=1):
        value = line.strip()
        if value not in index:
            allowed = ", ".join(repr(name) for name in labels)
            raise DataError(
                f"unknown label {value!r}; expected one of {allowed} (data.labels)", path, number
            )
        classes.append(index[value])
    return classes


def read_split(
    name: str,
    text_path: Path,
    label_path: Path,
    labels: list[str] | tuple[str, ...],
    text2_path: Path | None = None,
) -> RawSplit:
    """Read and cross-check one split's text and label files (and second texts)."""
    texts = [line.strip() for line in read_lines(text_path, f"{name} text file")]
    classes = read_labels(label_path, labels)
    if len(texts) != len(classes):
        raise DataError(
            f"{len(texts)} lines, but {label_path} has {len(classes)}; "
            "text and label files must have one line per review",
            text_path,
        )
    texts2 = None
    if text2_path is not None:
        texts2 = tuple(line.strip() for line in read_lines(text2_path, f"{name} text2 file"))
        if len(texts2) != len(texts):
            raise DataError(
                f"{len(texts2)} lines, but {text_path} has {len(texts)}; the second texts "
                "of pairs must have one line per example",
                text2_path,
            )
    return RawSplit(name, text_path, label_path, tuple(texts), tuple(classes), texts2)


def read_corpus(path: Path) -> tuple[str, ...]:
    """The unlabeled pretraining corpus: one sentence per line, blank lines dropped."""
    return tuple(s for s in (line.strip() for line in read_lines(path, "unlabeled corpus")) if s)
