"""The summary on a terminal: rich tables on a TTY, aligned plain text otherwise.

The cells are `build_tables`' own, and the results paragraph after them is
`results_paragraph`, so the terminal shows what the markdown, CSV and JSON reports
hold; only the not-counted list is cut to its first rows here.
"""

from __future__ import annotations

import sys
from typing import TextIO

from sweeper.summarize.paragraph import results_paragraph
from sweeper.summarize.records import Summary
from sweeper.summarize.tables import Table, build_tables, preamble

TERMINAL_NOT_COUNTED_ROWS = 20
"""The terminal lists this many not-counted runs; files and JSON list them all."""


def print_terminal(summary: Summary, file: TextIO | None = None) -> None:
    """The summary as `sweeper run` and `sweeper summarize` print it."""
    file = file or sys.stdout
    if file.isatty():
        print_rich(summary, file)
    else:
        file.write(to_plain(summary))
    file.flush()


def to_plain(summary: Summary, limit: int = TERMINAL_NOT_COUNTED_ROWS) -> str:
    """Aligned plain-text tables, then the results paragraph on one line (the terminal
    format when stdout is not a TTY)."""
    parts = ["\n".join(preamble(summary)) + "\n"]
    for table in build_tables(summary):
        shown = limit if table.name == "not_counted" else None
        parts.append(f"\n{table.title}\n{_plain_table(table, shown)}")
    parts.append(f"\nResults\n{results_paragraph(summary)}\n")
    return "".join(parts)


def _plain_table(table: Table, limit: int | None) -> str:
    if not table.rows:
        return "(none)\n"
    rows = table.text_rows(limit)
    headers = [c.header for c in table.columns]
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cell.rjust(w) if col.numeric else cell.ljust(w)
            for cell, w, col in zip(cells, widths, table.columns, strict=True)
        ).rstrip()

    out = [line(headers), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in rows)
    if limit is not None and len(table.rows) > limit:
        out.append(f"... and {len(table.rows) - limit} more (all in --format json or --out)")
    return "\n".join(out) + "\n"


def print_rich(
    summary: Summary,
    file: TextIO,
    limit: int = TERMINAL_NOT_COUNTED_ROWS,
    width: int | None = None,
) -> None:
    """Rich tables for an interactive terminal (cells wrap to the terminal's width),
    then the results paragraph."""
    from rich import box
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    console = Console(file=file, width=width)
    for line in preamble(summary):
        console.print(line, highlight=False, markup=False)
    for table in build_tables(summary):
        shown = limit if table.name == "not_counted" else None
        rich_table = RichTable(title=Text(table.title), title_justify="left", box=box.SIMPLE_HEAD)
        for column in table.columns:
            rich_table.add_column(column.header, justify="right" if column.numeric else "left")
        for cells in table.text_rows(shown):
            rich_table.add_row(*(Text(cell) for cell in cells))  # "[...]" is not markup
        console.print()
        if table.rows:
            console.print(rich_table)
        else:
            console.print(f"{table.title}\n(none)", highlight=False, markup=False)
        if shown is not None and len(table.rows) > shown:
            console.print(f"... and {len(table.rows) - shown} more (all in --format json or --out)")
    console.print()
    console.print("Results", style="bold", highlight=False, markup=False)
    console.print(results_paragraph(summary), highlight=False, markup=False)
