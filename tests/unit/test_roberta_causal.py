"""The left-to-right RoBERTa of the causal pretraining stage, without training it.

Known answers: with the causal mask the loss at position t (predicting token t + 1) is
the same whatever follows t + 1, while the same weights without the mask (the masked-LM
encoder) see the whole sentence; the model starts from the encoder and LM head that
`sweeper.models.init` draws for the seed; the corpus is read back as fairseq stored it,
one `<s>` sentence `</s>` per sample, too-long sentences skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sweeper.data.binarize import read_indexed, write_indexed
from sweeper.models.convert import TOKEN_TYPE_KEY, hf_to_fairseq
from sweeper.models.init import initial_state
from sweeper.spec.model_block import ArchConfig
from sweeper.trainers.fairseq.fairseq_pretrain import cache_key
from sweeper.trainers.hf.roberta_causal_main import causal_model, next_token_losses, samples
from sweeper.trainers.hf.roberta_causal_pretrain import causal_cache_key

ARCH = ArchConfig(layers=2, embed_dim=16, ffn_dim=32, heads=2, max_positions=32)
VOCAB = 40


def _pair() -> tuple[torch.Tensor, torch.Tensor]:
    """Two sentences equal up to token 4 and different after it, and their mask."""
    ids = torch.tensor([[0, 7, 8, 9, 10, 11, 12, 2], [0, 7, 8, 9, 10, 30, 31, 2]])
    return ids, torch.ones_like(ids)


def test_the_loss_at_t_does_not_depend_on_later_tokens() -> None:
    model = causal_model(ARCH, VOCAB, seed=3).eval()
    ids, mask = _pair()
    with torch.no_grad():
        losses = next_token_losses(model, ids, mask)
    # positions 0..3 predict tokens 1..4, from tokens the two rows share
    torch.testing.assert_close(losses[0, :4], losses[1, :4], rtol=0, atol=1e-6)
    assert (losses[0, 4:] - losses[1, 4:]).abs().min() > 1e-3  # the targets differ there


def test_the_same_weights_without_the_mask_see_the_whole_sentence() -> None:
    from transformers import RobertaForMaskedLM

    from sweeper.models.arch import hf_config

    causal = causal_model(ARCH, VOCAB, seed=3)
    encoder = RobertaForMaskedLM(hf_config(ARCH, VOCAB))  # the masked-LM stage's network
    encoder.load_state_dict(causal.state_dict(), strict=True)
    ids, mask = _pair()
    with torch.no_grad():
        losses = next_token_losses(encoder.eval(), ids, mask)
    assert (losses[0, :4] - losses[1, :4]).abs().max() > 1e-4


def test_padding_is_no_target_and_changes_no_real_position() -> None:
    model = causal_model(ARCH, VOCAB, seed=3).eval()
    ids, mask = _pair()
    padded = torch.cat([ids, torch.ones((2, 3), dtype=torch.long)], dim=1)
    padded_mask = torch.cat([mask, torch.zeros((2, 3), dtype=torch.long)], dim=1)
    with torch.no_grad():
        plain = next_token_losses(model, ids, mask)
        with_pad = next_token_losses(model, padded, padded_mask)
    torch.testing.assert_close(with_pad[:, : plain.shape[1]], plain, rtol=0, atol=1e-6)
    assert torch.all(with_pad[:, plain.shape[1] :] == 0)


def test_it_starts_from_the_seeds_masked_lm_init() -> None:
    model = causal_model(ARCH, VOCAB, seed=5)
    assert model.config.is_decoder
    drawn = initial_state(ARCH, VOCAB, 2, "random", 5, None)
    converted = hf_to_fairseq(model.state_dict())
    for key, value in drawn.items():
        if not key.startswith("classification_heads."):
            assert torch.equal(converted[key], value), key
    token_types = model.state_dict()[TOKEN_TYPE_KEY]
    assert not token_types.requires_grad and torch.all(token_types == 0)
    assert not torch.equal(
        hf_to_fairseq(causal_model(ARCH, VOCAB, seed=6).state_dict())[
            "encoder.sentence_encoder.embed_tokens.weight"
        ],
        converted["encoder.sentence_encoder.embed_tokens.weight"],
    )


def test_samples_are_the_stored_sentences_after_bos(tmp_path: Path) -> None:
    items = [[5, 6, 2], [7, 8, 9, 10, 11, 2], [12, 2]]
    write_indexed(tmp_path / "train", items, VOCAB)
    assert read_indexed(tmp_path / "train") == items
    kept, skipped = samples(tmp_path / "train", max_tokens=4)
    assert [row["input_ids"] for row in kept] == [[0, 5, 6, 2], [0, 12, 2]]
    assert all(row["labels"] == row["input_ids"] for row in kept) and skipped == 1
    with pytest.raises(FileNotFoundError, match="valid"):
        read_indexed(tmp_path / "valid")


def test_the_cache_key_names_the_objective(tmp_path: Path) -> None:
    from sweeper.spec.model_block import PretrainConfig

    (tmp_path / "train.bin").write_bytes(b"ids")
    config = PretrainConfig()
    masked, causal = cache_key(tmp_path, ARCH, config), causal_cache_key(tmp_path, ARCH, config)
    assert causal.startswith("causal_lm-") and causal.removeprefix("causal_lm-") != masked
    assert causal_cache_key(tmp_path, ARCH, config.model_copy(update={"seed": 9})) != causal
