"""The report as one HTML page, for the parent run's artifact viewer.

MLflow's artifact viewer renders an `.html` artifact as a page (markdown only as text),
so the report a user opens from the parent run in the UI is `report.html`: the preamble,
the results paragraph, every table of `build_tables` (the same cells as the terminal
and markdown), and the
figures inline as data URIs, so the one file is the whole report wherever it is copied.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path

from sweeper.summarize.paragraph import results_paragraph
from sweeper.summarize.records import Summary
from sweeper.summarize.tables import Table, build_tables, preamble

REPORT_HTML = "report.html"
STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #1f2328; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #d0d7de; padding: 0.3em 0.6em; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; border: 1px solid #d0d7de; margin: 0.5em 0; }
"""


def table_html(table: Table) -> str:
    if not table.rows:
        return "<p>(none)</p>"
    head = "".join(f"<th>{html.escape(c.header)}</th>" for c in table.columns)
    body = []
    for cells in table.text_rows():
        tds = (
            f'<td class="{"num" if c.numeric else "text"}">{html.escape(cell)}</td>'
            for c, cell in zip(table.columns, cells, strict=True)
        )
        body.append(f"<tr>{''.join(tds)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def to_html(summary: Summary, figures: Sequence[Path] = ()) -> str:
    """The whole report; `figures` (PNG files) are embedded."""
    title = html.escape(f"Summary of sweep {summary.sweep or summary.experiment}")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"]
    parts.append(f"<style>{STYLE}</style></head><body><h1>{title}</h1>")
    parts.extend(f"<p>{html.escape(line)}</p>" for line in preamble(summary))
    parts.append(f"<h2>Results</h2><p>{html.escape(results_paragraph(summary))}</p>")
    for table in build_tables(summary):
        parts.append(f"<h2>{html.escape(table.title)}</h2>{table_html(table)}")
    pngs = [Path(p) for p in figures if Path(p).suffix == ".png"]
    if pngs:
        parts.append("<h2>Figures</h2>")
    for path in pngs:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        parts.append(f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">')
    parts.append("</body></html>\n")
    return "".join(parts)
