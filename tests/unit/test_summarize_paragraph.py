"""The results paragraph: every number it quotes is the text of a table cell."""

from __future__ import annotations

import html
import io
import re
from collections.abc import Callable, Iterable
from dataclasses import replace

import pytest

from sweeper.summarize.html import to_html
from sweeper.summarize.latex import escape, to_latex
from sweeper.summarize.paragraph import results_paragraph, results_sentences
from sweeper.summarize.records import Summary
from sweeper.summarize.tables import Table, build_tables, comparisons_table, to_markdown
from sweeper.summarize.terminal import print_rich, to_plain
from tests.support.summaries import holm_summary, interval_summary, sequential_summary

NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?(?:e[+-]\d+)?")
SUMMARIES = pytest.mark.parametrize(
    "make", [holm_summary, interval_summary, sequential_summary], ids=["holm", "interval", "seq"]
)


def numbers(text: str, names: Iterable[str] = ()) -> set[str]:
    """The numbers in `text` as printed (`+24.17`, `[-1.50` -> `-1.50`), names removed."""
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, " ")
    return set(NUMBER.findall(text))


def cells(table: Table) -> list[dict[str, str]]:
    """Each row's cell text by column header."""
    headers = [column.header for column in table.columns]
    return [dict(zip(headers, row, strict=True)) for row in table.text_rows()]


def frame(table: Table) -> set[str]:
    """The numbers of a table's title and headers (levels, alpha, the plan)."""
    return numbers(" ".join([table.title, *(c.header for c in table.columns)]))


@SUMMARIES
def test_groups_sentence_quotes_table2(make: Callable[[], Summary]) -> None:
    summary = make()
    table2 = build_tables(summary)[1]
    sentence = results_sentences(summary)[0]
    allowed = frame(table2)
    for row in cells(table2):
        assert f"{row['Group']} scored {row['Mean']} (95% CI {row['95% CI (t)']})" in sentence
        allowed |= numbers(" ".join([row["n"], row["Mean"], row["95% CI (t)"]]))
    assert sentence.startswith(f"Over {cells(table2)[0]['n']} seeds per group, ")
    assert numbers(sentence, [g.group for g in summary.groups]) <= allowed


@SUMMARIES
def test_rule_sentence_quotes_the_comparisons_title(make: Callable[[], Summary]) -> None:
    summary = make()
    rule = results_sentences(summary)[1]
    table = comparisons_table(summary)
    assert numbers(rule) and numbers(rule) <= frame(table)
    expected = {
        holm_summary: "decided by Holm-adjusted p below the family-wise alpha = 0.05",
        interval_summary: "decided by its 98.75% t interval (Bonferroni, family-wise alpha",
        sequential_summary: "decided by its anytime-valid 98.75% interval",
    }
    assert expected[make] in rule


@SUMMARIES
def test_comparison_sentences_quote_their_row(make: Callable[[], Summary]) -> None:
    summary = make()
    table = comparisons_table(summary)
    sentences = results_sentences(summary)[2:]
    assert len(sentences) == len(summary.comparisons)
    interval_header = next(c.header for c in table.columns if c.header.startswith("Decision int"))
    level = interval_header.removeprefix("Decision interval (").removesuffix(")")
    for comparison, row in zip(summary.comparisons, cells(table), strict=True):
        [sentence] = [s for s in sentences if s.startswith(f"Within {row['Within']},")]
        names = [row["Within"], row["A - B"], comparison.group_a, comparison.group_b]
        assert numbers(sentence, names) <= numbers(" ".join(row.values())) | frame(table)
        assert f"{row['A - B']} = {row['Difference']} points" in sentence
        assert f"n = {comparison.n_pairs} pairs" in sentence and row["n A/B"] == "8/8"
        if comparison.rule == "Holm":
            assert f"{row['Test']} 95% CI {row['95% CI (t)']}" in sentence
            assert f"Holm-adjusted p = {row['p (Holm)']}" in sentence
        elif comparison.rule == "interval":
            assert f"Bonferroni {level} t interval {row[interval_header]}" in sentence
        else:
            assert f"anytime-valid {level} interval {row[interval_header]}" in sentence
            look, pairs = re.fullmatch(r"(\d+) \((\d+)\)", row["Look (pairs)"]).groups()
            assert f"at look {look}" in sentence
            assert pairs == str(comparison.n_pairs) or f"on {pairs} pairs" in sentence
        decision = row["Decision"]
        a, b = row["A - B"].split(" - ")
        if decision.endswith(" better"):
            winner, loser = (a, b) if decision == f"{comparison.group_a} better" else (b, a)
            assert f"{winner} beats {loser} on {row['Axis']}" in sentence
        elif decision.startswith("equivalent"):
            assert f"are {decision} on" in sentence
            assert f"the data support {row['Equivalent within']}" in sentence
        else:
            assert f"{a} vs {b} on {row['Axis']} is undecided" in sentence
            assert f"an estimated {row['Seeds needed (80% power)']} seeds per group" in sentence


@SUMMARIES
def test_decided_then_equivalent_then_undecided(make: Callable[[], Summary]) -> None:
    sentences = results_sentences(make())[2:]
    kinds = ["beats" if " beats " in s else "equivalent" if " are equivalent" in s else "un"
             for s in sentences]  # fmt: skip
    assert kinds == sorted(kinds, key=["beats", "equivalent", "un"].index)
    assert kinds.count("un") == 2 if make is holm_summary else kinds.count("equivalent") == 1


def test_fixed_n_directions_and_rounding() -> None:
    text = results_paragraph(holm_summary())
    assert "hf beats fairseq on framework: fairseq - hf = -21.38 points" in text
    assert "Holm-adjusted p = 1.6e-05 < 0.05" in text  # p's own format below 0.001
    assert "Holm-adjusted p = 0.820 >= 0.05" in text


def test_sequential_early_decision_names_its_look() -> None:
    text = results_paragraph(sequential_summary())
    assert "Seeds were added until decided (4 seeds, +2 per look, at most 10)" in text
    assert (
        "pretrained - random = +24.17 points (n = 8 pairs; decided at look 2 on 6 pairs: "
        "anytime-valid 98.75% interval [19.00, 29.33])" in text
    )
    assert "[-1.99, 6.56], at look 3, the last with data" in text


def test_sparse_groups_and_no_groups() -> None:
    summary = holm_summary()
    sparse = replace(summary, groups=[replace(summary.groups[0], n=1, ci_low=None, ci_high=None),
                                      *summary.groups[1:]])  # fmt: skip
    first = results_sentences(sparse)[0]
    assert first.startswith("fairseq/pretrained/full scored 74.00 over 1 seed, ")
    assert "fairseq/random/full scored 49.83 over 8 seeds (95% CI [46.95, 52.72])" in first
    empty = replace(summary, groups=[], comparisons=[], trials=[])
    assert results_paragraph(empty) == "No trial was counted, so there are no results to report."


def test_every_format_shows_the_paragraph() -> None:
    summary = sequential_summary()
    paragraph = results_paragraph(summary)
    markdown = to_markdown(summary)
    assert f"\n## Results\n\n{paragraph}\n" in markdown
    assert markdown.index("## Results") < markdown.index("## Table 1.")
    assert f"<h2>Results</h2><p>{html.escape(paragraph)}</p>" in to_html(summary)
    plain = to_plain(summary)
    assert plain.endswith(f"\nResults\n{paragraph}\n")
    buffer = io.StringIO()
    print_rich(summary, buffer, width=120)
    rich_text = " ".join(buffer.getvalue().split())
    assert rich_text.endswith("Results " + " ".join(paragraph.split()))
    assert f"\\paragraph{{Results.}} {escape(paragraph)}" in to_latex(summary)


def test_a_sequential_table_names_the_rule_of_each_comparison() -> None:
    """A plan extended past its --max-seeds leaves comparisons decided by two rules:
    the Rule column says which, and the title names both."""
    summary = sequential_summary()
    first, *rest = summary.comparisons
    mixed = replace(summary, comparisons=[replace(first, rule="group-sequential"), *rest])
    table = comparisons_table(mixed)
    assert [row["Rule"] for row in cells(table)] == [c.rule for c in mixed.comparisons]
    assert "group-sequential or anytime-valid" in table.title
    assert "Rule" not in [c.header for c in comparisons_table(holm_summary()).columns]
