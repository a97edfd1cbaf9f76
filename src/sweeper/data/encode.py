"""Text -> token ids, once, for both frameworks.

The pipeline is the one fairseq users run by hand (`spm_encode` then `fairseq-preprocess
--srcdict dict.txt`): sentencepiece pieces, each looked up in fairseq's `Dictionary`
(a piece missing from the dict becomes `<unk>` = 3). Sequences are truncated to
`max_positions - 2` tokens so that `<s>` + tokens + `</s>` fits the model; nothing
downstream truncates again, so both frameworks see identical inputs.
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

    def fairseq_items(self) -> list[list[int]]:
        """What fairseq's binarizer stores per sentence: the tokens then `</s>`."""
        return [[*ids, EOS] for ids in self.ids]

    def model_inputs(self) -> list[list[int]]:
        """What the model is fed: `<s>` + tokens + `</s>` (fairseq `--init-token 0`)."""
        return [[BOS, *ids, EOS] for ids in self.ids]


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
        self, name: str, texts: Sequence[str], labels: Sequence[int] | None = None
    ) -> EncodedSplit:
        full = self.ids(texts)
        return EncodedSplit(
            name=name,
            ids=tuple(tuple(ids[: self.max_tokens]) for ids in full),
            raw_lengths=tuple(len(ids) for ids in full),
            unknown=sum(ids.count(UNK) for ids in full),
            labels=None if labels is None else tuple(labels),
        )
