"""One `ArchConfig`, two real models: fairseq's RoBERTa and HF's `RobertaConfig`.

Both frameworks must be built from the same numbers, and through their own code: a
parameter count or a weight conversion checked against a hand-written replica of either
model would prove nothing about the model the trainers actually run. So the fairseq
model is built the way `fairseq-train` builds it (its own argument parser, the
`roberta_base` architecture defaults, a `Dictionary` of the right size), from the very
command-line flags the fairseq trainer passes (`fairseq_arch_args`).

fairseq and HF agree on RoBERTa's id conventions, which the conversion relies on:
`<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3, positions start at padding_idx + 1 = 2, so the
position table has `max_positions + 2` rows in both.

Heavy imports (torch, fairseq, transformers) happen inside the functions that need them:
the trainers' launchers import `fairseq_arch_args` without paying for them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.spec.model_block import ArchConfig

if TYPE_CHECKING:
    from fairseq.data import Dictionary
    from fairseq.models.roberta import RobertaModel
    from transformers import RobertaConfig

BOS, PAD, EOS, UNK = 0, 1, 2, 3
"""fairseq's special-symbol ids, which RoBERTa checkpoints (and HF's config) share."""
NUM_SPECIALS = 4
"""`<s> <pad> </s> <unk>` precede the dict.txt entries; `<mask>` follows them."""
POSITION_OFFSET = PAD + 1
"""Positions are numbered from padding_idx + 1: the table has max_positions + 2 rows."""
FAIRSEQ_ARCH = "roberta_base"
"""The registered fairseq architecture whose defaults the spec's numbers override."""
HEAD_NAME = "sentence_classification_head"
"""fairseq `sentence_prediction`'s default `--classification-head-name`."""
POOLER_DROPOUT = 0.0
"""fairseq RoBERTa's default `--pooler-dropout`; HF's `classifier_dropout` is set to it."""


def fairseq_arch_args(arch: ArchConfig) -> list[str]:
    """The `fairseq-train` flags that build this architecture (for every task).

    `--max-positions` matters twice: `sentence_prediction` copies its own
    `max_positions` (default 512) into the model, so without the flag the position table
    would not match the spec's, nor the pretrained checkpoint's.
    """
    return [
        "--arch", FAIRSEQ_ARCH,
        "--encoder-layers", str(arch.layers),
        "--encoder-embed-dim", str(arch.embed_dim),
        "--encoder-ffn-embed-dim", str(arch.ffn_dim),
        "--encoder-attention-heads", str(arch.heads),
        "--max-positions", str(arch.max_positions),
        "--activation-fn", arch.activation,
    ]  # fmt: skip


def position_rows(arch: ArchConfig) -> int:
    """Rows of the learned position table in both frameworks (fairseq's padding offset)."""
    return arch.max_positions + POSITION_OFFSET


def vocab_size_from_dict(path: Path) -> int:
    """Embedding rows for a fairseq `dict.txt`, counted by fairseq's own loader.

    Mirrors `sentence_prediction.load_dictionary`: the 4 specials, one row per dict line
    (`#fairseq:overwrite` lines included), then `<mask>` unless the dict already has it.
    """
    from fairseq.data import Dictionary

    dictionary = Dictionary.load(str(path))
    dictionary.add_symbol("<mask>")
    return len(dictionary)


def fairseq_dictionary(vocab_size: int) -> Dictionary:
    """A fairseq `Dictionary` with `vocab_size` rows: specials, filler pieces, `<mask>`."""
    from fairseq.data import Dictionary

    if vocab_size < NUM_SPECIALS + 1:
        raise ValueError(f"vocab_size {vocab_size} leaves no room for the 4 specials + <mask>")
    dictionary = Dictionary()
    for index in range(vocab_size - NUM_SPECIALS - 1):
        dictionary.add_symbol(f"piece{index}")
    dictionary.add_symbol("<mask>")
    return dictionary


def fairseq_args(
    arch: ArchConfig, dropout: float = 0.1, attention_dropout: float = 0.1
) -> argparse.Namespace:
    """fairseq's parsed training args for this arch (all of `roberta_base`'s defaults).

    Parsed by fairseq's own training parser from `fairseq_arch_args`, so a flag fairseq
    would reject fails here too. The data path and `--num-classes` are placeholders the
    task needs to parse: parsing reads no data, and the head is registered separately.
    """
    from fairseq import options

    flags = [
        "<data>", "--task", "sentence_prediction", "--num-classes", "2",
        *fairseq_arch_args(arch),
        "--dropout", str(dropout), "--attention-dropout", str(attention_dropout),
    ]  # fmt: skip
    return options.parse_args_and_arch(options.get_training_parser(), input_args=flags)


def build_fairseq_model(
    arch: ArchConfig,
    vocab_size: int,
    num_classes: int | None = None,
    dropout: float = 0.1,
    attention_dropout: float = 0.1,
) -> RobertaModel:
    """fairseq's `RobertaModel` for this arch, randomly initialised by fairseq itself.

    With `num_classes`, the classification head is registered exactly as the
    `sentence_prediction` task does it (same name, same default inner dim). The weights
    are fairseq's (`init_bert_params`, then PyTorch defaults for the head), drawn from
    torch's global RNG: seed it first for a reproducible model.
    """
    from types import SimpleNamespace

    from fairseq.models.roberta import RobertaModel

    args = fairseq_args(arch, dropout, attention_dropout)
    dictionary = fairseq_dictionary(vocab_size)
    task = SimpleNamespace(source_dictionary=dictionary, max_positions=lambda: arch.max_positions)
    model = RobertaModel.build_model(args, task)
    if num_classes is not None:
        model.register_classification_head(HEAD_NAME, num_classes=num_classes)
    return model


def hf_config(
    arch: ArchConfig,
    vocab_size: int,
    num_classes: int = 2,
    dropout: float = 0.1,
    attention_dropout: float = 0.1,
    pooler_dropout: float = POOLER_DROPOUT,
) -> RobertaConfig:
    """The HF `RobertaConfig` that is the same network as `build_fairseq_model`.

    `type_vocab_size=1` gives HF one token-type row that fairseq lacks (set to zeros by
    the conversion, it adds nothing); `layer_norm_eps` is fairseq's 1e-5; the classifier
    dropout follows fairseq's pooler dropout rather than HF's default (hidden dropout).
    """
    from transformers import RobertaConfig

    return RobertaConfig(
        vocab_size=vocab_size,
        hidden_size=arch.embed_dim,
        num_hidden_layers=arch.layers,
        num_attention_heads=arch.heads,
        intermediate_size=arch.ffn_dim,
        hidden_act=arch.activation,
        max_position_embeddings=position_rows(arch),
        type_vocab_size=1,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
        layer_norm_eps=1e-5,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=attention_dropout,
        classifier_dropout=pooler_dropout,
        num_labels=num_classes,
        problem_type="single_label_classification",
    )
