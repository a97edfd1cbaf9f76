"""The one exception data preparation raises for bad input.

A data problem is only fixable when the message points at the exact file and line, so
the location is part of the exception rather than something each caller formats.
"""

from __future__ import annotations

from pathlib import Path


class DataError(Exception):
    """Input data that cannot be prepared; `str()` reads `FILE:LINE: message`, or
    `FILE:row N: message` for a table row without a line of its own (CSV, Parquet).

    The CLI prints it as `error: ...` and exits 2, before anything is written.
    """

    def __init__(
        self,
        message: str,
        path: Path | str | None = None,
        line: int | None = None,
        row: int | None = None,
    ):
        self.message = message
        self.path = None if path is None else Path(path)
        self.line = line
        self.row = row
        where = ""
        if self.path is not None:
            if line is not None:
                where = f"{self.path}:{line}: "
            elif row is not None:
                where = f"{self.path}:row {row}: "
            else:
                where = f"{self.path}: "
        super().__init__(f"{where}{message}")
