"""fairseq -> HF key mapping on a synthetic state dict (no fairseq, no transformers).

The integration parity test proves the mapping numerically; these pin down the rules
that a parity test on one architecture would not exercise: older key names, the fused
attention projection, tied LM-head keys, and loud failures on foreign keys.
"""

from __future__ import annotations

import pytest
import torch

from sweeper.models.convert import TOKEN_TYPE_KEY, fairseq_to_hf, normalise_fairseq_keys

DIM, FFN, VOCAB, ROWS = 8, 16, 20, 12


def _layer(prefix: str) -> dict[str, torch.Tensor]:
    shapes = {
        "self_attn.q_proj": (DIM, DIM),
        "self_attn.k_proj": (DIM, DIM),
        "self_attn.v_proj": (DIM, DIM),
        "self_attn.out_proj": (DIM, DIM),
        "self_attn_layer_norm": (DIM,),
        "fc1": (FFN, DIM),
        "fc2": (DIM, FFN),
        "final_layer_norm": (DIM,),
    }
    out = {}
    for name, shape in shapes.items():
        out[f"{prefix}{name}.weight"] = torch.randn(shape)
        out[f"{prefix}{name}.bias"] = torch.randn(shape[0])
    return out


def fairseq_state(layers: int = 2, head: bool = True) -> dict[str, torch.Tensor]:
    enc = "encoder.sentence_encoder."
    embed = torch.randn(VOCAB, DIM)
    state = {
        f"{enc}version": torch.tensor([3.0]),
        f"{enc}embed_tokens.weight": embed,
        f"{enc}embed_positions.weight": torch.randn(ROWS, DIM),
        f"{enc}layernorm_embedding.weight": torch.randn(DIM),
        f"{enc}layernorm_embedding.bias": torch.randn(DIM),
        "encoder.lm_head.weight": embed,
        "encoder.lm_head.bias": torch.randn(VOCAB),
        "encoder.lm_head.dense.weight": torch.randn(DIM, DIM),
        "encoder.lm_head.dense.bias": torch.randn(DIM),
        "encoder.lm_head.layer_norm.weight": torch.randn(DIM),
        "encoder.lm_head.layer_norm.bias": torch.randn(DIM),
    }
    for index in range(layers):
        state.update(_layer(f"{enc}layers.{index}."))
    if head:
        head = "classification_heads.sentence_classification_head."
        for name, shape in {"dense": (DIM, DIM), "out_proj": (3, DIM)}.items():
            state[f"{head}{name}.weight"] = torch.randn(shape)
            state[f"{head}{name}.bias"] = torch.randn(shape[0])
    return state


def test_every_classifier_weight_lands_on_its_hf_name() -> None:
    state = fairseq_state()
    hf = fairseq_to_hf(state)
    enc = "encoder.sentence_encoder."
    hf0, hf1 = "roberta.encoder.layer.0.", "roberta.encoder.layer.1."
    fs0, fs1 = f"{enc}layers.0.", f"{enc}layers.1."
    head = "classification_heads.sentence_classification_head."
    expected = {
        "roberta.embeddings.word_embeddings.weight": f"{enc}embed_tokens.weight",
        "roberta.embeddings.position_embeddings.weight": f"{enc}embed_positions.weight",
        "roberta.embeddings.LayerNorm.bias": f"{enc}layernorm_embedding.bias",
        f"{hf1}attention.self.query.weight": f"{fs1}self_attn.q_proj.weight",
        f"{hf1}attention.self.key.bias": f"{fs1}self_attn.k_proj.bias",
        f"{hf0}attention.self.value.weight": f"{fs0}self_attn.v_proj.weight",
        f"{hf0}attention.output.dense.weight": f"{fs0}self_attn.out_proj.weight",
        f"{hf0}attention.output.LayerNorm.weight": f"{fs0}self_attn_layer_norm.weight",
        f"{hf1}intermediate.dense.weight": f"{fs1}fc1.weight",
        f"{hf1}output.dense.bias": f"{fs1}fc2.bias",
        f"{hf1}output.LayerNorm.weight": f"{fs1}final_layer_norm.weight",
        "classifier.dense.weight": f"{head}dense.weight",
        "classifier.out_proj.bias": f"{head}out_proj.bias",
    }
    for hf_key, fs_key in expected.items():
        assert torch.equal(hf[hf_key], state[fs_key]), hf_key
    # 4 embedding tensors + token type + 16 per layer + 4 head tensors; no LM head.
    assert len(hf) == 4 + 1 + 2 * 16 + 4
    assert not any(key.startswith("lm_head") for key in hf)
    assert torch.equal(hf[TOKEN_TYPE_KEY], torch.zeros(1, DIM))


def test_lm_head_is_converted_with_hf_tied_names() -> None:
    state = fairseq_state(head=False)
    hf = fairseq_to_hf(state, head=None, lm_head=True)
    assert torch.equal(hf["lm_head.decoder.weight"], state["encoder.lm_head.weight"])
    assert torch.equal(hf["lm_head.bias"], state["encoder.lm_head.bias"])
    assert torch.equal(hf["lm_head.decoder.bias"], state["encoder.lm_head.bias"])
    assert torch.equal(hf["lm_head.layer_norm.weight"], state["encoder.lm_head.layer_norm.weight"])
    assert not any(key.startswith("classifier") for key in hf)


def test_old_names_and_fused_attention_are_upgraded_as_fairseq_does() -> None:
    state = fairseq_state(layers=1)
    prefix = "encoder.sentence_encoder.layers.0.self_attn."
    q, k, v = (state.pop(f"{prefix}{n}_proj.weight") for n in "qkv")
    qb, kb, vb = (state.pop(f"{prefix}{n}_proj.bias") for n in "qkv")
    old = {key.replace("encoder.", "decoder.", 1): value for key, value in state.items()}
    old = {key.replace(".layernorm_embedding.", ".emb_layer_norm."): v for key, v in old.items()}
    old["decoder.sentence_encoder.layers.0.self_attn.in_proj_weight"] = torch.cat([q, k, v])
    old["decoder.sentence_encoder.layers.0.self_attn.in_proj_bias"] = torch.cat([qb, kb, vb])
    upgraded = normalise_fairseq_keys(old)
    assert torch.equal(upgraded[f"{prefix}k_proj.weight"], k)
    assert torch.equal(upgraded[f"{prefix}v_proj.bias"], vb)
    hf = fairseq_to_hf(old)
    assert torch.equal(hf["roberta.encoder.layer.0.attention.self.value.weight"], v)
    assert "roberta.embeddings.LayerNorm.weight" in hf


def test_unknown_key_is_an_error_not_silently_dropped() -> None:
    state = fairseq_state()
    state["encoder.sentence_encoder.layer_norm.weight"] = torch.randn(DIM)  # pre-norm model
    with pytest.raises(ValueError, match=r"layer_norm\.weight"):
        fairseq_to_hf(state)


def test_missing_head_names_the_heads_present() -> None:
    state = fairseq_state()
    with pytest.raises(ValueError, match=r"'other'.*sentence_classification_head"):
        fairseq_to_hf(state, head="other")
    with pytest.raises(ValueError, match="lm_head"):
        fairseq_to_hf({k: v for k, v in state.items() if "lm_head" not in k}, lm_head=True)
