"""Sentence pairs: one truncation rule, RoBERTa's pair layout, stats over both texts."""

from __future__ import annotations

import pytest

from sweeper.data.encode import EncodedSplit, truncate_pair
from sweeper.data.split_stats import split_stats


@pytest.mark.parametrize(
    ("a", "b", "budget", "kept"),
    [
        (5, 3, 10, (5, 3)),  # fits: untouched
        (8, 3, 8, (5, 3)),  # the longer loses tokens
        (6, 6, 9, (5, 4)),  # a tie cuts the second (HF's longest_first), then alternates
        (2, 9, 6, (2, 4)),
    ],
)
def test_the_longer_text_loses_its_last_tokens_first(a, b, budget, kept):
    first, second = truncate_pair(range(10, 10 + a), range(50, 50 + b), budget)
    assert (len(first), len(second)) == kept
    assert first == tuple(range(10, 10 + kept[0])) and second == tuple(range(50, 50 + kept[1]))


def _pair_split() -> EncodedSplit:
    return EncodedSplit(
        name="train",
        ids=((7, 8), (9,)),
        raw_lengths=(4, 5),
        unknown=0,
        labels=(1, 0),
        ids2=((5,), (6, 6)),
    )


def test_pairs_are_fed_as_roberta_pairs_and_binarized_as_input0_input1():
    split = _pair_split()
    assert split.model_inputs() == [[0, 7, 8, 2, 2, 5, 2], [0, 9, 2, 2, 6, 6, 2]]
    assert split.fairseq_items() == [[7, 8, 2], [9, 2]]
    assert split.fairseq_items(second=True) == [[5, 2], [6, 6, 2]]


def test_stats_count_both_texts_of_a_pair():
    stats = split_stats(_pair_split(), ["0", "1"])
    assert stats["tokens"] == 3 + 3
    assert stats["truncated"] == 2  # 4 > 3 and 5 > 3 tokens before truncation
