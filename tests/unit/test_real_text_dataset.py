"""tools/real_text_dataset.py: fortune files parsed, split and written deterministically, with
no text in two splits and no valid or test text in the unlabeled corpus (no network)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tools.real_text_dataset import (
    UsageError,
    build_dataset,
    dedupe_key,
    main,
    parse_fortunes,
    read_categories,
    source_md,
    write_dataset,
)

FORTUNE_FILE = """\
A computer lets you make more mistakes faster than any invention
in human history, with the possible exceptions of handguns and tequila.
\t\t-- Mitch Ratcliffe
%

%
Real programmers don't comment their code.
%
Real  programmers don't\tcomment
their code.
%
    Indented first line
second line\r
%
last one, no trailing separator"""


def test_parse_keeps_lines_and_skips_empty_records() -> None:
    texts = parse_fortunes(FORTUNE_FILE)
    assert texts == [
        "A computer lets you make more mistakes faster than any invention\n"
        "in human history, with the possible exceptions of handguns and tequila.\n"
        "\t\t-- Mitch Ratcliffe",
        "Real programmers don't comment their code.",
        "Real  programmers don't\tcomment\ntheir code.",
        "    Indented first line\nsecond line",
        "last one, no trailing separator",
    ]
    assert parse_fortunes("") == []
    assert parse_fortunes("%\n%\n") == []
    # the two "Real programmers" records are the same text once whitespace is collapsed
    assert dedupe_key(texts[1]) == dedupe_key(texts[2])


def make_categories(n: int = 40) -> dict[str, list[str]]:
    """Three labeled categories of different sizes, one unlabeled, with duplicates."""
    categories: dict[str, list[str]] = {
        "computers": [f"The computer number {i} crashed\n\t\t-- user {i}" for i in range(n)],
        "politics": [f"Vote for candidate {i}, said the senator." for i in range(n // 2)],
        "startrek": [
            f"Beam me up, number {i}.\n\t\t-- Kirk, stardate {i}.1" for i in range(n // 4)
        ],
        "zippy": [f"Are we having FUN yet, {i}?" for i in range(n)],
    }
    # an exact duplicate within a class, a whitespace variant, a text in two labeled
    # classes, and a labeled text also in the unlabeled-only category
    categories["computers"] += ["The computer number 3 crashed\n\t\t-- user 3"]
    categories["computers"] += ["The  computer number 4 crashed -- user 4"]
    categories["computers"] += ["Shared by two labeled classes."]
    categories["politics"] += ["Shared by two labeled classes."]
    categories["zippy"] += ["Vote for candidate 1, said the senator."]
    return categories


LABELS = ["computers", "politics", "startrek"]


def test_splits_disjoint_stratified_and_no_leak_into_unlabeled() -> None:
    data = build_dataset(make_categories(), LABELS, seed=0)
    splits = data.splits()
    keys = {name: [dedupe_key(text) for text, _ in items] for name, items in splits.items()}
    for name, ks in keys.items():
        assert len(ks) == len(set(ks)), f"duplicate inside {name}"
    assert not set(keys["train"]) & set(keys["valid"])
    assert not set(keys["train"]) & set(keys["test"])
    assert not set(keys["valid"]) & set(keys["test"])

    unlabeled = [dedupe_key(text) for text in data.unlabeled]
    assert len(unlabeled) == len(set(unlabeled))
    assert not set(unlabeled) & (set(keys["valid"]) | set(keys["test"]))
    # every train text and every other category's text is in the unlabeled corpus
    assert set(keys["train"]) <= set(unlabeled)
    assert dedupe_key("Are we having FUN yet, 7?") in unlabeled

    # every class in every split, about 10% each in valid and test
    for name in ("valid", "test"):
        labels = [label for _, label in splits[name]]
        assert sorted(set(labels)) == LABELS
        assert labels.count("computers") == 4
        assert labels.count("startrek") == 1
    # duplicates (exact, whitespace variant, across categories) counted; the text of two
    # labeled classes is in no labeled split
    assert data.duplicates == 4
    assert data.ambiguous == 1
    all_labeled = [key for ks in keys.values() for key in ks]
    assert dedupe_key("Shared by two labeled classes.") not in all_labeled
    assert len(all_labeled) == 40 + 20 + 10


def test_deterministic_and_independent_of_input_order(tmp_path: Path) -> None:
    categories = make_categories()
    shuffled = {
        name: random.Random(1).sample(texts, len(texts))
        for name, texts in reversed(list(categories.items()))
    }
    first = build_dataset(categories, LABELS, seed=0)
    second = build_dataset(shuffled, list(reversed(LABELS)), seed=0)
    assert first == second
    other_seed = build_dataset(categories, LABELS, seed=1)
    assert other_seed.test != first.test

    outs = []
    for name, data in (("a", first), ("b", second)):
        out = tmp_path / name
        write_dataset(out, data, source_md(data, [], LABELS, "cmd"))
        outs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert outs[0] == outs[1]
    assert sorted(outs[0]) == [
        "SOURCE.md",
        "test.jsonl",
        "train.jsonl",
        "unlabeled.jsonl",
        "valid.jsonl",
    ]
    rows = [json.loads(line) for line in outs[0]["train.jsonl"].decode().splitlines()]
    assert all(set(row) == {"text", "label"} and isinstance(row["label"], str) for row in rows)
    assert any("\n" in row["text"] for row in rows)  # multi-line texts kept as they are
    rows = [json.loads(line) for line in outs[0]["unlabeled.jsonl"].decode().splitlines()]
    assert all(set(row) == {"text"} for row in rows)


def test_max_per_class_leaves_the_rest_unlabeled() -> None:
    data = build_dataset(make_categories(), LABELS, seed=0, max_per_class=12)
    counts = {label: 0 for label in LABELS}
    for items in data.splits().values():
        for _, label in items:
            counts[label] += 1
    assert counts == {"computers": 12, "politics": 12, "startrek": 10}
    assert data.capped == (40 - 12) + (20 - 12)


def test_read_categories_skips_indexes_links_and_pictures(tmp_path: Path) -> None:
    (tmp_path / "computers").write_text(FORTUNE_FILE, encoding="utf-8")
    (tmp_path / "computers.dat").write_bytes(b"\x00\x01")
    (tmp_path / "computers.u8").symlink_to(tmp_path / "computers")
    (tmp_path / "ascii-art").write_text("  /\\_/\\\n%\n", encoding="utf-8")
    assert list(read_categories(tmp_path)) == ["computers"]
    (tmp_path / "latin1").write_bytes("caf\xe9\n%\n".encode("latin-1"))
    with pytest.raises(UsageError, match="not UTF-8"):
        read_categories(tmp_path)


def test_bad_choices_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="unknown categories: nope"):
        build_dataset(make_categories(), ["computers", "nope"])
    with pytest.raises(UsageError, match="at least two"):
        build_dataset(make_categories(), ["computers"])
    with pytest.raises(UsageError, match="sum below 1"):
        build_dataset(make_categories(), LABELS, valid_fraction=0.5, test_fraction=0.5)


def fake_tools(tmp_path: Path, apt_get: str | None) -> Path:
    """A PATH holding a do-nothing dpkg-deb and, unless None, an apt-get running `apt_get`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {"dpkg-deb": "exit 0"}
    if apt_get is not None:
        scripts["apt-get"] = apt_get
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
        path.chmod(0o755)
    return bin_dir


@pytest.mark.parametrize(
    ("apt_get", "message"),
    [
        (None, "`apt-get` not found"),
        (
            "echo 'E: Failed to fetch http://deb.debian.org/x  Temporary failure resolving' >&2\n"
            "exit 100",
            "offline or no package index",
        ),
    ],
    ids=["apt-get missing", "offline"],
)
def test_no_download_exits_2_with_what_to_do(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    apt_get: str | None,
    message: str,
) -> None:
    monkeypatch.setenv("PATH", str(fake_tools(tmp_path, apt_get)))
    out = tmp_path / "out"
    code = main(["--cache", str(tmp_path / "cache"), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and message in err
    assert not out.exists()
