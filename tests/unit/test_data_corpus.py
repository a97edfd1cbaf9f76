"""The demo corpus generator: determinism, the 6+6 training adjectives, label noise."""

from __future__ import annotations

import pytest

from sweeper.data.demo_corpus import (
    NEGATIVE,
    NEGATIVE_CONTEXTS,
    POSITIVE,
    POSITIVE_CONTEXTS,
    generate_corpus,
    train_adjectives,
    write_corpus,
)
from sweeper.spec.data_block import GenerateConfig

SMALL = GenerateConfig(
    seed=3, train_size=400, valid_size=300, test_size=300, unlabeled_size=2000, label_noise=0.0
)


def adjective_of(review: str) -> str:
    """Reviews end with "<adjective> ."."""
    return review.split()[-2]


def test_word_lists_have_30_distinct_adjectives_per_polarity() -> None:
    assert len(set(POSITIVE)) == 30
    assert len(set(NEGATIVE)) == 30
    assert not set(POSITIVE) & set(NEGATIVE)


def test_same_seed_same_corpus_other_seed_other_corpus() -> None:
    assert generate_corpus(SMALL) == generate_corpus(SMALL)
    other = generate_corpus(SMALL.model_copy(update={"seed": 4}))
    assert other.splits["train"].reviews != generate_corpus(SMALL).splits["train"].reviews


def test_sizes_and_balanced_classes() -> None:
    corpus = generate_corpus(SMALL)
    for name, size in (("train", 400), ("valid", 300), ("test", 300)):
        split = corpus.splits[name]
        assert len(split.reviews) == len(split.labels) == size
        assert split.labels.count("1") == size // 2
    assert len(corpus.unlabeled) == 2000


def test_train_split_uses_only_its_six_adjectives_per_polarity() -> None:
    corpus = generate_corpus(SMALL)
    positive, negative = train_adjectives(SMALL.seed)
    assert len(set(positive)) == len(set(negative)) == 6
    train = corpus.splits["train"]
    used: dict[str, set[str]] = {"0": set(), "1": set()}
    for review, label in zip(train.reviews, train.labels, strict=True):
        used[label].add(adjective_of(review))
    assert used == {"0": set(negative), "1": set(positive)}


def test_valid_and_test_use_all_sixty_adjectives_with_their_polarity() -> None:
    corpus = generate_corpus(SMALL)
    for name in ("valid", "test"):
        split = corpus.splits[name]
        seen = set()
        for review, label in zip(split.reviews, split.labels, strict=True):
            adjective = adjective_of(review)
            assert adjective in (POSITIVE if label == "1" else NEGATIVE), review
            seen.add(adjective)
        assert len(seen) > 50  # far beyond the 12 of the training split
    both = {adjective_of(r) for n in ("valid", "test") for r in corpus.splits[n].reviews}
    assert both == set(POSITIVE) | set(NEGATIVE)


def test_unlabeled_sentences_are_single_polarity_and_cover_every_adjective() -> None:
    corpus = generate_corpus(SMALL)
    seen = set()
    for sentence in corpus.unlabeled:
        words = set(sentence.split())
        pos, neg = words & set(POSITIVE), words & set(NEGATIVE)
        assert bool(pos) != bool(neg), sentence
        contexts = POSITIVE_CONTEXTS if pos else NEGATIVE_CONTEXTS
        assert any(c in sentence for c in contexts), sentence
        seen |= pos | neg
    assert seen == set(POSITIVE) | set(NEGATIVE)


def test_label_noise_flips_exactly_that_fraction_deterministically() -> None:
    clean = generate_corpus(SMALL)
    noisy_cfg = SMALL.model_copy(update={"label_noise": 0.1})
    noisy = generate_corpus(noisy_cfg)
    for name in ("train", "valid", "test"):
        a, b = clean.splits[name], noisy.splits[name]
        assert a.reviews == b.reviews  # noise changes labels, not text
        flipped = sum(x != y for x, y in zip(a.labels, b.labels, strict=True))
        assert flipped == round(0.1 * len(a.labels))
    assert generate_corpus(noisy_cfg) == noisy


def test_custom_label_names_follow_polarity() -> None:
    corpus = generate_corpus(SMALL, labels=("neg", "pos"))
    split = corpus.splits["test"]
    for review, label in zip(split.reviews, split.labels, strict=True):
        assert adjective_of(review) in (POSITIVE if label == "pos" else NEGATIVE)


@pytest.mark.parametrize("stems", [{"train": "train", "valid": "valid", "test": "test"},
                                   {"train": "tr", "valid": "dev", "test": "te"}])  # fmt: skip
def test_write_corpus_writes_the_cls_books_layout(tmp_path, stems) -> None:
    corpus = generate_corpus(SMALL)
    written = write_corpus(corpus, tmp_path, stems, "review", "label", "unlabeled.txt")
    assert {p.name for p in written} == {
        *(f"{stem}.{suffix}" for stem in stems.values() for suffix in ("review", "label")),
        "unlabeled.txt",
    }
    lines = (tmp_path / f"{stems['valid']}.review").read_text(encoding="utf-8").split("\n")
    assert lines[:-1] == list(corpus.splits["valid"].reviews) and lines[-1] == ""
    labels = (tmp_path / f"{stems['valid']}.label").read_text(encoding="utf-8").split()
    assert labels == list(corpus.splits["valid"].labels)


def test_the_pair_task_pairs_opposite_reviews_and_labels_the_positive_ones_place() -> None:
    corpus = generate_corpus(SMALL, pairs=True)
    for name, size in (("train", 400), ("valid", 300), ("test", 300)):
        split = corpus.splits[name]
        assert split.second is not None
        assert len(split.reviews) == len(split.second) == len(split.labels) == size
        assert split.labels.count("1") == size // 2
        for first, second, label in zip(split.reviews, split.second, split.labels, strict=True):
            positive = second if label == "1" else first
            negative = first if label == "1" else second
            assert adjective_of(positive) in POSITIVE and adjective_of(negative) in NEGATIVE
    positive, negative = train_adjectives(SMALL.seed)
    train = corpus.splits["train"]
    assert {adjective_of(r) for r in (*train.reviews, *train.second)} == {*positive, *negative}


def test_pairs_leave_the_single_review_corpus_as_it_was() -> None:
    assert generate_corpus(SMALL, pairs=False) == generate_corpus(SMALL)
    assert generate_corpus(SMALL).splits["train"].second is None
