"""HuggingFace model folders made by the tests themselves (nothing can be downloaded).

`save_hf_folder` writes what a researcher's `save_pretrained` would: config, safetensors
weights and a fast tokenizer. The weights are a fairseq state dict converted with
sweeper's forward converter, with every tensor perturbed first (zeros and ones would
hide a swapped bias or norm) and a non-zero token-type row (which the reverse converter
must fold into the positions). The tokenizer is sentencepiece's BPE merges with
fairseq's ids (`model.dictionary`) and RoBERTa's special-token template, so it encodes
text, and text pairs, exactly as sweeper does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from sweeper.models.arch import build_fairseq_model, hf_config
from sweeper.models.convert import TOKEN_TYPE_KEY, fairseq_to_hf
from sweeper.spec.model_block import ArchConfig

DEMO_ARCH = ArchConfig(layers=2, embed_dim=64, ffn_dim=128, heads=4, max_positions=64)
LAB_ARCH = ArchConfig(
    layers=4, embed_dim=512, ffn_dim=512, heads=8, max_positions=256, vocab_size=32000
)


def perturbed_fairseq_state(arch: ArchConfig, vocab_size: int, seed: int = 0) -> dict:
    """A fairseq RoBERTa state dict (with LM head) where no tensor is at its init value."""
    torch.manual_seed(seed)
    model = build_fairseq_model(arch, vocab_size)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "embed_positions" in name:
                continue  # keep the padding row fairseq zeroes; others get noise below
            param.add_(torch.randn_like(param) * 0.05)
        positions = model.encoder.sentence_encoder.embed_positions.weight
        positions[2:].add_(torch.randn_like(positions[2:]) * 0.05)
    return model.state_dict()


def hf_model(
    state: dict,
    arch: ArchConfig,
    vocab_size: int,
    kind: str = "masked_lm",
    model_type: str = "roberta",
) -> Any:
    """The HF model (`kind`: masked_lm or base) holding the fairseq weights, with a
    random token-type row."""
    from transformers import (
        CamembertConfig,
        CamembertForMaskedLM,
        CamembertModel,
        RobertaForMaskedLM,
        RobertaModel,
    )

    config = hf_config(arch, vocab_size)
    if model_type == "camembert":
        config = CamembertConfig(**config.to_diff_dict())
    converted = fairseq_to_hf(state, head=None, lm_head=kind == "masked_lm")
    converted[TOKEN_TYPE_KEY] = torch.randn_like(converted[TOKEN_TYPE_KEY]) * 0.05
    classes = {
        ("roberta", "masked_lm"): RobertaForMaskedLM,
        ("roberta", "base"): RobertaModel,
        ("camembert", "masked_lm"): CamembertForMaskedLM,
        ("camembert", "base"): CamembertModel,
    }
    model = classes[(model_type, kind)](config)
    if kind == "base":
        converted = {k.removeprefix("roberta."): v for k, v in converted.items()}
        converted.update({k: v for k, v in model.state_dict().items() if k.startswith("pooler.")})
    model.load_state_dict(converted, strict=True)
    return model.eval()


def save_tokenizer(sentencepiece: Path, dictionary: Path, folder: Path) -> None:
    """A fast tokenizer with sentencepiece's merges and `dictionary`'s fairseq ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import SentencePieceExtractor

    from sweeper.data.vocab import fairseq_ids

    extracted = SentencePieceExtractor(str(sentencepiece)).extract(models.BPE)
    vocab = fairseq_ids(dictionary)
    for piece in extracted["vocab"]:
        vocab.setdefault(piece, len(vocab))  # pieces the corpus never used: ids past the model's
    tokenizer = Tokenizer(
        models.BPE(vocab=vocab, merges=extracted["merges"], unk_token="<unk>", fuse_unk=True)
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁")
    tokenizer.decoder = decoders.Metaspace(replacement="▁")
    # RoBERTa's specials: `<s> A </s>`, and `<s> A </s></s> B </s>` for a pair.
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    specials = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, mask_token="<mask>", **specials
    ).save_pretrained(folder)


def save_hf_folder(
    folder: Path,
    state: dict,
    arch: ArchConfig,
    vocab_size: int,
    sentencepiece: Path,
    dictionary: Path,
    kind: str = "masked_lm",
    model_type: str = "roberta",
) -> Any:
    """Write an HF model folder as `save_pretrained` does; returns the model."""
    model = hf_model(state, arch, vocab_size, kind, model_type)
    model.save_pretrained(folder)
    save_tokenizer(sentencepiece, dictionary, folder)
    return model
