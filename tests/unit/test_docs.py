"""The documentation stays true to the repository: docs/spec.md is what the schema
generates, every field of the schema says what it means, and every relative link in
README.md and docs/*.md leads to a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from sweeper.spec.schema import SweepSpec
from tools.spec_doc import DEFAULT_OUT, blocks, field_docs, render

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
"""`[text](target)` and `![alt](target)`, optionally `<target>` and a "title"."""
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$", re.MULTILINE)
"""`[label]: target` definitions."""
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
"""http(s)://, mailto: and any other scheme: not a file of the repository."""


def link_targets(text: str) -> list[str]:
    """Relative link targets of a markdown text, fragment removed; code is not markdown,
    so fenced blocks and code spans are left out."""
    prose = CODE_SPAN.sub("", FENCE.sub("", text))
    found = INLINE_LINK.findall(prose) + REFERENCE_LINK.findall(prose)
    targets = []
    for target in found:
        if not target or target.startswith("#") or EXTERNAL.match(target):
            continue
        targets.append(target.split("#", 1)[0])
    return targets


def test_spec_doc_is_what_the_schema_generates():
    committed = DEFAULT_OUT.read_text(encoding="utf-8") if DEFAULT_OUT.is_file() else ""
    assert committed == render(), (
        "docs/spec.md differs from what src/sweeper/spec.py generates: run `make spec-doc` "
        "and commit docs/spec.md"
    )


def test_every_field_reachable_from_the_spec_has_a_docstring():
    reached = blocks(SweepSpec)
    assert len(reached) >= 10  # the walk found the nested blocks, not just the top level
    missing = [
        f"{block.model.__name__}.{name} ({block.path or 'top level'})"
        for block in reached
        for name, doc in field_docs(block.model).items()
        if not doc
    ]
    assert not missing, (
        f"{len(missing)} spec field(s) without a docstring (write one under the field in "
        f"src/sweeper/spec.py, then `make spec-doc`): {', '.join(missing)}"
    )


def test_the_docstring_reader_sees_what_is_there_and_what_is_not():
    class Inner(BaseModel):
        documented: int = 1
        """One line.

        And a second paragraph."""
        bare: str = "x"

    class Outer(BaseModel):
        inner: Inner | None = None
        """The nested block."""
        many: dict[str, Inner] = {}
        """Inner blocks by name."""

    assert field_docs(Inner) == {"documented": "One line.\n\nAnd a second paragraph.", "bare": ""}
    assert [(b.path, b.model) for b in blocks(Outer)] == [("", Outer), ("inner", Inner)]
    assert "| `bare` | str | `x` |  |" in render(Outer)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_lead_to_files_that_exist(page: Path):
    broken = [
        target
        for target in link_targets(page.read_text(encoding="utf-8"))
        if not (page.parent / target).resolve().exists()
    ]
    assert not broken, f"{page.relative_to(REPO)} links to missing files: {broken}"


def test_the_link_finder_reads_markdown_as_markdown():
    text = "\n".join(
        [
            "[a](docs/a.md) ![fig](figures/x.png) [b](b.md#part)",
            '[e](e.md "a title") [web](https://x.org/y.md) [m](mailto:me@x.org) [s](#sec)',
            "`[not](code.md)` and",
            "```",
            "[not](fenced.md)",
            "```",
            "[ref]: ref.md",
        ]
    )
    assert sorted(link_targets(text)) == sorted(
        ["docs/a.md", "figures/x.png", "b.md", "e.md", "ref.md"]
    )
    assert PAGES[0].name == "README.md" and len(PAGES) > 5
