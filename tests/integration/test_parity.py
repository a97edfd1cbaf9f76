"""Logits parity: a fairseq RoBERTa and its HF conversion are the same function.

Real fairseq, real transformers, random weights scaled up so that attention is far from
uniform and every weight moves the output (with fairseq's 0.02-std init, a misplaced
tensor could hide under the tolerance). The batch mixes lengths, so padding, the
position offset and the attention mask are all exercised.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

fairseq = pytest.importorskip("fairseq")
transformers = pytest.importorskip("transformers")

from sweeper.models.arch import BOS, EOS, HEAD_NAME, PAD, build_fairseq_model, hf_config  # noqa: E402
from sweeper.models.convert import fairseq_to_hf  # noqa: E402
from sweeper.spec.model_block import ArchConfig  # noqa: E402

pytestmark = pytest.mark.integration

ARCH = ArchConfig(layers=2, embed_dim=64, ffn_dim=128, heads=4, max_positions=32)
VOCAB, CLASSES, TOL = 100, 3, 1e-4


def _scale_up(model: torch.nn.Module, seed: int) -> None:
    """Replace every parameter with N(0, 0.3²) draws (tied weights stay tied)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.3)


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    """<s> ... </s> sequences of lengths 12, 9, 5, 3, right-padded with <pad>."""
    generator = torch.Generator().manual_seed(5)
    rows = []
    for length in (12, 9, 5, 3):
        body = torch.randint(4, VOCAB - 1, (length - 2,), generator=generator).tolist()
        rows.append([BOS, *body, EOS] + [PAD] * (12 - length))
    return torch.tensor(rows), torch.tensor([0, 2, 1, 2])


@pytest.fixture(scope="module")
def fairseq_model():
    torch.manual_seed(0)
    model = build_fairseq_model(ARCH, VOCAB, CLASSES)
    _scale_up(model, seed=1)
    return model.eval()


def _hf_classifier(state: dict[str, torch.Tensor]):
    model = transformers.RobertaForSequenceClassification(hf_config(ARCH, VOCAB, CLASSES))
    model.load_state_dict(state, strict=True)
    return model.eval()


def _both_logits(fairseq_model, hf_model) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, _ = _batch()
    with torch.no_grad():
        fs_logits, _ = fairseq_model(tokens, classification_head_name=HEAD_NAME)
        hf_logits = hf_model(input_ids=tokens, attention_mask=tokens.ne(PAD)).logits
    return fs_logits, hf_logits


def test_classifier_logits_and_loss_match(fairseq_model) -> None:
    hf_model = _hf_classifier(fairseq_to_hf(fairseq_model.state_dict()))
    tokens, labels = _batch()
    fs_logits, hf_logits = _both_logits(fairseq_model, hf_model)
    assert fs_logits.std() > 0.1, "logits too flat for the comparison to mean anything"
    assert (fs_logits - hf_logits).abs().max() <= TOL
    with torch.no_grad():
        hf_loss = hf_model(input_ids=tokens, attention_mask=tokens.ne(PAD), labels=labels).loss
    # fairseq's sentence_prediction criterion: summed NLL of log-softmax over the batch.
    fs_loss = F.nll_loss(F.log_softmax(fs_logits, dim=-1), labels, reduction="sum") / len(labels)
    assert abs(fs_loss.item() - hf_loss.item()) <= TOL


def test_a_misplaced_tensor_breaks_parity(fairseq_model) -> None:
    """The comparison is sensitive: swapping query and key of one layer is caught."""
    state = fairseq_to_hf(fairseq_model.state_dict())
    attn = "roberta.encoder.layer.1.attention.self."
    state[attn + "query.weight"], state[attn + "key.weight"] = (
        state[attn + "key.weight"],
        state[attn + "query.weight"],
    )
    fs_logits, hf_logits = _both_logits(fairseq_model, _hf_classifier(state))
    assert (fs_logits - hf_logits).abs().max() > 100 * TOL


def test_masked_lm_logits_match(fairseq_model) -> None:
    config = hf_config(ARCH, VOCAB, CLASSES)
    hf_model = transformers.RobertaForMaskedLM(config)
    hf_model.load_state_dict(fairseq_to_hf(fairseq_model.state_dict(), head=None, lm_head=True))
    hf_model.eval()
    tokens, _ = _batch()
    real = tokens.ne(PAD)
    with torch.no_grad():
        fs_logits, _ = fairseq_model(tokens)
        hf_logits = hf_model(input_ids=tokens, attention_mask=real).logits
    assert hf_logits.shape == (4, 12, VOCAB)
    assert (fs_logits[real] - hf_logits[real]).abs().max() <= TOL
