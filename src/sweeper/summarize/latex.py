r"""The report as a LaTeX fragment to paste into a paper (`--format latex`, summary.tex).

`to_latex` gives Table 1, Table 2 and the comparisons (and the variance table where there
is one) as booktabs tables, each a `tabular` between `\toprule`, `\midrule` and
`\bottomrule` inside a `table` float with its `\caption` (the table's title) and
`\label{tab:<sweep>-<table>}`, then the results paragraph (`sweeper.summarize.paragraph`).
The cells are `build_tables`' own text, so
every number is the one the other formats print. All text is escaped: LaTeX's specials
`\ { } _ % & # $ ~ ^`, also `< > |` (the default OT1 encoding would print other glyphs
for them) and `±` (as `$\pm$`); a cell opening with `[` or `*` is guarded so the `\\`
before it cannot read it as its argument. The not-counted list and the search stage
stay in the other formats.

The document's preamble needs `\usepackage{booktabs}` (the rules) and
`\usepackage{graphicx}`: a table wider than `\linewidth` (the comparisons, usually)
is scaled down to it by `\resizebox`, a narrower one keeps its size. A float does not
break across pages, so a long Table 1 needs cutting or `longtable`. `to_document`
wraps the fragment in a minimal `article` that compiles on its own.
"""

from __future__ import annotations

import re

from sweeper.summarize.paragraph import results_paragraph
from sweeper.summarize.records import Summary
from sweeper.summarize.tables import Table, build_tables, preamble

LATEX_TABLES = ("table1", "table2", "comparisons")
"""The tables of the fragment, by `Table.name`, in report order."""
LATEX_WHERE_ANY = ("variance",)
"""Tables after them where the summary has one (`build_tables` gives them only then)."""
PACKAGES = ("booktabs", "graphicx")
"""What the fragment needs in the document's preamble."""
_ESCAPES = str.maketrans(
    {
        "\\": r"\textbackslash{}",
        "{": r"\{",
        "}": r"\}",
        "_": r"\_",
        "%": r"\%",
        "&": r"\&",
        "#": r"\#",
        "$": r"\$",
        "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}",
        "<": r"\textless{}",
        ">": r"\textgreater{}",
        "|": r"\textbar{}",
        "±": r"$\pm$",
    }
)
_FIT = r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%"
"""Scale the tabular down to the line's width when it is wider, never up."""


def escape(text: str) -> str:
    """`text` as LaTeX prints it literally (one pass: nothing is escaped twice)."""
    return text.translate(_ESCAPES)


def cell(text: str) -> str:
    """One escaped cell; `{}` in front of a leading `[` or `*`, which `\\` would take
    for its optional argument or star."""
    escaped = escape(text)
    return "{}" + escaped if escaped.startswith(("[", "*")) else escaped


def label(summary: Summary, table: Table) -> str:
    """`tab:<sweep>-<table>`, with only letters, digits and `-` (safe in any label)."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", summary.sweep or summary.experiment).strip("-")
    return f"tab:{slug or 'sweep'}-{table.name}"


def table_latex(table: Table, label_text: str) -> str:
    """One booktabs table: a header row, then a row per record (`(none)` without one),
    each with as many `&`-separated cells as the table has columns."""
    caption = re.sub(r"^Table \d+\. ", "", table.title)
    short = re.split(r" \(|;", caption, maxsplit=1)[0]
    spec = "".join("r" if column.numeric else "l" for column in table.columns)
    rows = [" & ".join(cell(text) for text in cells) for cells in table.text_rows()]
    if not rows:
        rows = [rf"\multicolumn{{{len(table.columns)}}}{{l}}{{(none)}}"]
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        rf"\caption[{{{escape(short)}}}]{{{escape(caption)}}}",
        rf"\label{{{label_text}}}",
        _FIT,
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(cell(column.header) for column in table.columns) + r" \\",
        r"\midrule",
        *(row + r" \\" for row in rows),
        r"\bottomrule",
        r"\end{tabular}%",
        "}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


def to_latex(summary: Summary) -> str:
    """The fragment: the preamble as comments, the tables, the results paragraph."""
    title = f"Summary of sweep {summary.sweep or summary.experiment}"
    notes = [title, *preamble(summary), f"needs \\usepackage{{{','.join(PACKAGES)}}}"]
    parts = ["".join(f"% {line.replace(chr(10), ' ')}\n" for line in notes)]
    tables = {table.name: table for table in build_tables(summary)}
    parts.extend(
        "\n" + table_latex(tables[name], label(summary, tables[name]))
        for name in (*LATEX_TABLES, *(n for n in LATEX_WHERE_ANY if n in tables))
    )
    parts.append(f"\n\\paragraph{{Results.}} {escape(results_paragraph(summary))}\n")
    return "".join(parts)


def to_document(summary: Summary) -> str:
    """`to_latex` in a minimal `article` that pdflatex compiles as it is."""
    return (
        "\\documentclass{article}\n"
        + "".join(f"\\usepackage{{{package}}}\n" for package in PACKAGES)
        + "\\begin{document}\n"
        + to_latex(summary)
        + "\\end{document}\n"
    )
