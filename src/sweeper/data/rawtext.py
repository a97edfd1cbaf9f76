"""Line files (`format: lines`, `.txt` corpora) and the split every format is read into.

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
    """A split's normalised texts and class indices (position in the labels), aligned;
    for a table format both paths are the table's file."""

    name: str
    text_path: Path
    label_path: Path
    texts: tuple[str, ...]
    labels: tuple[int, ...]
    texts2: tuple[str, ...] | None = None
    """Each pair's second text (`data.text2_suffix` or `data.text2_field`); None for
    single texts."""


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
