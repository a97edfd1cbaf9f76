"""Text -> token ids, once, for both frameworks.

The pipeline is the one fairseq users run by hand (`spm_encode` then `fairseq-preprocess
--srcdict dict.txt`): sentencepiece pieces, each looked up in fairseq's `Dictionary`
(a piece missing from the dict becomes `<unk>` = 3). Sequences are truncated to
`max_positions - 2` tokens so that `<s>` + tokens + `</s>` fits the model; nothing
downstream truncates again, so both frameworks see identical inputs.

A sentence pair is fed as RoBERTa was pretrained on pairs: `<s> A </s></s> B </s>`,
which is what fairseq's `sentence_prediction` task builds from `input0` (A, `</s>`),
`--init-token 0` and `input1` prefixed with `--separator-token 2`, and what HF's
RoBERTa tokenizers make of a text pair. The pair's 4 special tokens leave
`max_positions - 4` for A + B; the longer of the two loses its last token until
they fit (HF's `longest_first`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sweeper.data.vocab import BOS, EOS, UNK


@dataclass(frozen=True)
class EncodedSplit:
    """A split's token ids (truncated, without `<s>`/`</s>`) plus what truncation cut."""

    name: str
    ids: tuple[tuple[int, ...], ...]
    raw_lengths: tuple[int, ...]
    """Tokens per sentence before truncation."""
    unknown: int
    """`<unk>` tokens, counted before truncation."""
    labels: tuple[int, ...] | None = None
    """Class indices (position in `data.labels`); None for the unlabeled corpus."""
    ids2: tuple[tuple[int, ...], ...] | None = None
    """Each pair's second text, truncated with the first; None for single texts.
    `raw_lengths` and `unknown` then count both texts."""

    def kept_lengths(self) -> list[int]:
        """Tokens per example after truncation (both texts of a pair)."""
        if self.ids2 is None:
            return [len(ids) for ids in self.ids]
        return [len(a) + len(b) for a, b in zip(self.ids, self.ids2, strict=True)]

    def fairseq_items(self, second: bool = False) -> list[list[int]]:
        """What fairseq's binarizer stores per text (`input0`, or `input1` with
        `second`): the tokens then `</s>`."""
        texts = self.ids2 if second else self.ids
        assert texts is not None
        return [[*ids, EOS] for ids in texts]

    def model_inputs(self) -> list[list[int]]:
        """What the model is fed: `<s>` A `</s>` (fairseq `--init-token 0`), then for a
        pair `</s>` B `</s>` (`--separator-token 2` before `input1`)."""
        if self.ids2 is None:
            return [[BOS, *ids, EOS] for ids in self.ids]
        return [[BOS, *a, EOS, EOS, *b, EOS] for a, b in zip(self.ids, self.ids2, strict=True)]


class Encoder:
    """Sentencepiece + fairseq dict, with the truncation length fixed once."""

    def __init__(self, processor: Any, dictionary: Any, max_positions: int):
        self.processor = processor
        self.dictionary = dictionary
        self.max_tokens = max_positions - 2

    def ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Untruncated ids per text (one batched sentencepiece call)."""
        index = self.dictionary.index
        return [
            [index(p) for p in pieces]
            for pieces in self.processor.encode(list(texts), out_type=str)
        ]

    def encode(
        self,
        name: str,
        texts: Sequence[str],
        labels: Sequence[int] | None = None,
        texts2: Sequence[str] | None = None,
    ) -> EncodedSplit:
        full = self.ids(texts)
        labels = None if labels is None else tuple(labels)
        if texts2 is None:
            return EncodedSplit(
                name=name,
                ids=tuple(tuple(ids[: self.max_tokens]) for ids in full),
                raw_lengths=tuple(len(ids) for ids in full),
                unknown=sum(ids.count(UNK) for ids in full),
                labels=labels,
            )
        full2 = self.ids(texts2)
        pairs = [truncate_pair(a, b, self.max_tokens - 2) for a, b in zip(full, full2, strict=True)]
        return EncodedSplit(
            name=name,
            ids=tuple(a for a, _ in pairs),
            raw_lengths=tuple(len(a) + len(b) for a, b in zip(full, full2, strict=True)),
            unknown=sum(ids.count(UNK) for ids in (*full, *full2)),
            labels=labels,
            ids2=tuple(b for _, b in pairs),
        )


def truncate_pair(
    a: Sequence[int], b: Sequence[int], budget: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Drop the last token of the longer text (the second on a tie) until both fit:
    the rule of HF tokenizers' `longest_first`, so a tokenizer truncating a pair to
    `max_positions` gives the same ids."""
    keep_a, keep_b = len(a), len(b)
    while keep_a + keep_b > budget:
        if keep_a > keep_b:
            keep_a -= 1
        else:
            keep_b -= 1
    return tuple(a[:keep_a]), tuple(b[:keep_b])
