"""The LaTeX fragment: booktabs tables of the report's own cells, escaped, and it compiles."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import replace

import pytest

from sweeper.summarize.latex import LATEX_TABLES, escape, to_document, to_latex
from sweeper.summarize.records import Summary
from sweeper.summarize.report import write_report
from sweeper.summarize.tables import build_tables
from tests.support.summaries import holm_summary, interval_summary, sequential_summary

SPECIALS = r"50% & #1 of $x$ {y} ~ ^ \z ±3 <a|b> under_score"
ESCAPED_SPECIALS = (
    r"50\% \& \#1 of \$x\$ \{y\} \textasciitilde{} \textasciicircum{} \textbackslash{}z "
    r"$\pm$3 \textless{}a\textbar{}b\textgreater{} under\_score"
)
TABULAR = re.compile(r"\\begin\{tabular\}\{([lr]+)\}\n(.*?)\n\\end\{tabular\}", re.S)
SUMMARIES = pytest.mark.parametrize(
    "make", [holm_summary, interval_summary, sequential_summary], ids=["holm", "interval", "seq"]
)


def with_specials() -> Summary:
    """A summary whose sweep name and Table 2 notes hold every LaTeX special."""
    summary = sequential_summary()
    groups = [replace(group, note=SPECIALS) for group in summary.groups]
    return replace(summary, sweep="demo_1 #x", groups=groups)


def balanced(text: str) -> bool:
    """Braces nest and close, escaped ones (`\\{`) and comments aside."""
    depth, index = 0, 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 1  # the next character is escaped (or starts a command name)
        elif char == "%":
            index = text.find("\n", index)
            if index < 0:
                break
        elif char in "{}":
            depth += 1 if char == "{" else -1
            if depth < 0:
                return False
        index += 1
    return depth == 0


def split_row(row: str) -> list[str]:
    assert row.endswith(r" \\"), row
    return re.split(r"(?<!\\)&", row.removesuffix(r" \\"))


@SUMMARIES
def test_booktabs_tables_of_the_report_cells(make: Callable[[], Summary]) -> None:
    summary = make()
    text = to_latex(summary)
    assert balanced(text)
    assert text.count(r"\begin{table}[htbp]") == text.count(r"\end{table}") == 3
    assert re.findall(r"\\label\{(.*?)\}", text) == [f"tab:demo-{name}" for name in LATEX_TABLES]
    assert len(re.findall(r"\\caption\[\{.+?\}\]\{.+?\}\n", text)) == 3
    tables = {t.name: t for t in build_tables(summary)}
    found = TABULAR.findall(text)
    assert len(found) == 3
    for name, (spec, body) in zip(LATEX_TABLES, found, strict=True):
        table = tables[name]
        assert spec == "".join("r" if c.numeric else "l" for c in table.columns)
        lines = body.split("\n")
        assert lines[0] == r"\toprule" and lines[2] == r"\midrule" and lines[-1] == r"\bottomrule"
        header, rows = lines[1], lines[3:-1]
        assert len(rows) == len(table.rows) > 0
        assert split_row(header)[0].strip() == escape(table.columns[0].header)
        for line, cells in zip(rows, table.text_rows(), strict=True):
            parts = [part.strip() for part in split_row(line)]
            assert len(parts) == len(spec)
            assert [p.removeprefix("{}") for p in parts] == [escape(c).strip() for c in cells]
    assert r"\paragraph{Results.} Over 8 seeds per group, " in text


def test_specials_are_escaped_everywhere() -> None:
    assert escape(SPECIALS) == ESCAPED_SPECIALS
    text = to_latex(with_specials())
    assert balanced(text)
    assert f"& {ESCAPED_SPECIALS} \\\\\n" in text  # Table 2's note column, last cell
    assert r"\label{tab:demo-1-x-table2}" in text
    assert r"$\pm$2.50" in text and "±" not in text
    assert r"n \textgreater{}= 21" in text and r"P(A\textgreater{}B)" in text
    assert r"{}[19.00, 29.33]" in text  # a cell opening with `[` is not `\\`'s argument
    for _, body in TABULAR.findall(text):
        for line in body.split("\n"):
            bare = re.sub(r"\\(textbackslash|textasciitilde|textasciicircum|textless|"
                          r"textgreater|textbar)\{\}|\\[_%&#${}]|\$\\pm\$", "", line)  # fmt: skip
            bare = bare.removesuffix(r" \\").replace(" & ", " ").replace("{}", "")
            if not line.startswith("\\"):
                assert not set(bare) & set("\\{}_%&#$~^<>|±"), line


def test_no_rows_read_none_and_report_writes_summary_tex(tmp_path) -> None:
    summary = replace(holm_summary(), comparisons=[])
    text = to_latex(summary)
    columns = len(build_tables(summary)[2].columns)
    assert f"\\midrule\n\\multicolumn{{{columns}}}{{l}}{{(none)}} \\\\\n\\bottomrule" in text
    written = write_report(summary, tmp_path, figures=False)
    assert tmp_path / "summary.tex" in written
    assert (tmp_path / "summary.tex").read_text(encoding="utf-8") == text


@pytest.mark.skipif(
    shutil.which("pdflatex") is None,
    reason="pdflatex not on PATH (Debian: apt-get install texlive-latex-base "
    "texlive-latex-recommended); the fragment's structure is still checked above",
)
def test_pdflatex_compiles_the_fragment(tmp_path) -> None:
    (tmp_path / "report.tex").write_text(to_document(with_specials()), encoding="utf-8")
    command = ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape"]
    result = subprocess.run(
        [*command, "report.tex"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert (tmp_path / "report.pdf").read_bytes()[:5] == b"%PDF-"
    log = (tmp_path / "report.log").read_text(encoding="utf-8", errors="replace")
    assert "Missing character" not in log and "Undefined control sequence" not in log
