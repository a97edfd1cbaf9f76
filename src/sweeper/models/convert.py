"""fairseq RoBERTa weights <-> HF RoBERTa-family weights, by one table of names.

This is what makes "same starting weights" (docs/architecture.md, invariant 2) true for
the HF trials: the pretrained checkpoint exists in fairseq format only, and the random
init is drawn by fairseq, so HF gets both through this one mapping, checked by a logits-parity test.

The two models are the same network under different names, except:
- HF has a token-type embedding (one row with `type_vocab_size=1`); fairseq has none,
  so the row is zeros and adds nothing to the embeddings.
- Positions need no shifting: both use padding_idx 1 and number real tokens from 2, so
  row r of fairseq's table is row r of HF's.
- fairseq ties the LM head's output weight to the token embeddings; HF ties
  `lm_head.decoder.weight` likewise and `lm_head.decoder.bias` to `lm_head.bias`.

Every fairseq key is either mapped or explicitly ignored: an unknown key is an error, so
a checkpoint of a different architecture fails loudly instead of converting partially.

`hf_to_fairseq` is the reverse, for a pretrained HF folder used as `model.checkpoint`
(`sweeper.models.hf_import`): it reads the same tables backwards, so the two directions
cannot drift apart.
"""

from __future__ import annotations

import re

import torch
from torch import Tensor

from sweeper.models.arch import HEAD_NAME

_ENC = "encoder.sentence_encoder."
_HF_ENC = "roberta.encoder.layer."
_EMBEDDINGS = {
    "embed_tokens.weight": "roberta.embeddings.word_embeddings.weight",
    "embed_positions.weight": "roberta.embeddings.position_embeddings.weight",
    "layernorm_embedding.weight": "roberta.embeddings.LayerNorm.weight",
    "layernorm_embedding.bias": "roberta.embeddings.LayerNorm.bias",
}
_LAYER_KEY = re.compile(r"layers\.(\d+)\.(.+)\.(weight|bias)")
_LAYER_MODULES = {
    "self_attn.q_proj": "attention.self.query",
    "self_attn.k_proj": "attention.self.key",
    "self_attn.v_proj": "attention.self.value",
    "self_attn.out_proj": "attention.output.dense",
    "self_attn_layer_norm": "attention.output.LayerNorm",
    "fc1": "intermediate.dense",
    "fc2": "output.dense",
    "final_layer_norm": "output.LayerNorm",
}
_LM_HEAD = {
    "encoder.lm_head.dense.weight": ("lm_head.dense.weight",),
    "encoder.lm_head.dense.bias": ("lm_head.dense.bias",),
    "encoder.lm_head.layer_norm.weight": ("lm_head.layer_norm.weight",),
    "encoder.lm_head.layer_norm.bias": ("lm_head.layer_norm.bias",),
    "encoder.lm_head.weight": ("lm_head.decoder.weight",),
    "encoder.lm_head.bias": ("lm_head.bias", "lm_head.decoder.bias"),
}
_IGNORED = {"encoder.sentence_encoder.version"}
"""Buffers with no weight in them (fairseq's state-dict format version)."""
TOKEN_TYPE_KEY = "roberta.embeddings.token_type_embeddings.weight"


def normalise_fairseq_keys(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Apply fairseq's own renames for older checkpoints, so one mapping covers them all.

    The same upgrades `RobertaModel.upgrade_state_dict_named` and
    `MultiheadAttention.upgrade_state_dict_named` make when fairseq loads such a file:
    `decoder.*` -> `encoder.*`, `emb_layer_norm` -> `layernorm_embedding`, and a fused
    `in_proj_weight/bias` split into q, k, v.
    """
    out: dict[str, Tensor] = {}
    for key, value in state.items():
        if key.startswith("decoder."):
            key = "encoder." + key[len("decoder.") :]
        key = key.replace(".emb_layer_norm.", ".layernorm_embedding.")
        fused = re.fullmatch(r"(.+\.self_attn)\.in_proj_(weight|bias)", key)
        if fused:
            prefix, kind = fused.groups()
            for name, part in zip(("q", "k", "v"), value.chunk(3, dim=0), strict=True):
                out[f"{prefix}.{name}_proj.{kind}"] = part
            continue
        out[key] = value
    return out


def _encoder_key(key: str) -> str | None:
    """HF name of an `encoder.sentence_encoder.*` key, or None if it is not one."""
    if not key.startswith(_ENC):
        return None
    rest = key[len(_ENC) :]
    if rest in _EMBEDDINGS:
        return _EMBEDDINGS[rest]
    match = _LAYER_KEY.fullmatch(rest)
    if match and match.group(2) in _LAYER_MODULES:
        index, module, kind = match.groups()
        return f"{_HF_ENC}{index}.{_LAYER_MODULES[module]}.{kind}"
    return None


def _head_key(key: str, head: str | None) -> str | None:
    """HF `classifier.*` name of the chosen fairseq classification head's key."""
    prefix = f"classification_heads.{head}."
    if head is None or not key.startswith(prefix):
        return None
    rest = key[len(prefix) :]
    if rest in {"dense.weight", "dense.bias", "out_proj.weight", "out_proj.bias"}:
        return "classifier." + rest
    return None


def fairseq_to_hf(
    state: dict[str, Tensor], head: str | None = HEAD_NAME, lm_head: bool = False
) -> dict[str, Tensor]:
    """Convert a fairseq RoBERTa `model` state dict into HF names.

    head: the fairseq classification head that becomes HF's `classifier` (None: none,
    e.g. for `RobertaForMaskedLM`). lm_head: also convert `encoder.lm_head.*`.
    Other classification heads, and the LM head when not wanted, are dropped on purpose;
    any other unknown key raises ValueError naming it.
    """
    state = normalise_fairseq_keys(state)
    out: dict[str, Tensor] = {}
    unknown: list[str] = []
    for key, value in state.items():
        hf_key = _encoder_key(key) or _head_key(key, head)
        if hf_key is not None:
            out[hf_key] = value
        elif key in _LM_HEAD:
            if lm_head:
                out.update(dict.fromkeys(_LM_HEAD[key], value))
        elif not (key in _IGNORED or key.startswith("classification_heads.")):
            unknown.append(key)
    if unknown:
        raise ValueError(f"fairseq keys with no HF counterpart: {', '.join(sorted(unknown))}")
    _require_present(state, out, head, lm_head)
    word = out["roberta.embeddings.word_embeddings.weight"]
    out[TOKEN_TYPE_KEY] = torch.zeros(1, word.shape[1], dtype=word.dtype)
    return out


def _require_present(
    state: dict[str, Tensor], out: dict[str, Tensor], head: str | None, lm_head: bool
) -> None:
    """Fail with the missing fairseq part named, rather than with HF's strict-load list."""
    if "roberta.embeddings.word_embeddings.weight" not in out:
        raise ValueError("not a fairseq RoBERTa state dict: no encoder.sentence_encoder.*")
    if head is not None and "classifier.out_proj.weight" not in out:
        heads = sorted({k.split(".")[1] for k in state if k.startswith("classification_heads.")})
        raise ValueError(f"no classification head {head!r} in the state dict (has: {heads})")
    if lm_head and "lm_head.decoder.weight" not in out:
        raise ValueError("no encoder.lm_head.* in the state dict")


_FAIRSEQ_VERSION_KEY = "encoder.sentence_encoder.version"
_HF_IGNORED = (
    "roberta.pooler.",
    "roberta.embeddings.position_ids",
    "roberta.embeddings.token_type_ids",
)
"""HF tensors fairseq has no use for: the pooler (fairseq's classification head has its
own dense layer) and index buffers."""


def hf_to_fairseq(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Convert an HF RoBERTa-family state dict (`*ForMaskedLM`, or the bare `*Model`
    without the `roberta.` prefix) into a fairseq RoBERTa `model` state dict.

    HF's token-type row 0 is added to every position row (fairseq has no token types;
    HF adds row 0 to every token, so the sum is unchanged). A bare `*Model` has no LM
    head: the result then has none either (`has_lm_head` says so). A tied LM-head
    weight that `save_pretrained` left out is the word embeddings. Unknown keys raise.
    """
    state = {
        (k if k.startswith(("roberta.", "lm_head.")) else f"roberta.{k}"): v
        for k, v in state.items()
    }
    encoder = {hf: f"{_ENC}{fs}" for fs, hf in _EMBEDDINGS.items()}
    lm_head = {hf: fs for fs, hfs in _LM_HEAD.items() for hf in hfs}
    out: dict[str, Tensor] = {}
    unknown: list[str] = []
    for key, value in state.items():
        fs_key = encoder.get(key) or _hf_layer_key(key) or lm_head.get(key)
        if fs_key is not None:
            out.setdefault(fs_key, value)
        elif not (key == TOKEN_TYPE_KEY or key.startswith(_HF_IGNORED)):
            unknown.append(key)
    if unknown:
        raise ValueError(f"HF keys with no fairseq counterpart: {', '.join(sorted(unknown))}")
    word = f"{_ENC}embed_tokens.weight"
    if word not in out:
        raise ValueError("not a RoBERTa-family state dict: no embeddings.word_embeddings")
    if TOKEN_TYPE_KEY in state:
        positions = f"{_ENC}embed_positions.weight"
        out[positions] = out[positions] + state[TOKEN_TYPE_KEY][0]
    if has_lm_head(out):
        out.setdefault("encoder.lm_head.weight", out[word])  # tied, not saved by HF
    out[_FAIRSEQ_VERSION_KEY] = torch.tensor([3.0])  # fairseq's encoder format version
    return out


def has_lm_head(state: dict[str, Tensor]) -> bool:
    """Whether a fairseq state dict carries the masked-LM head's own layers."""
    return "encoder.lm_head.dense.weight" in state


def _hf_layer_key(key: str) -> str | None:
    """fairseq name of a `roberta.encoder.layer.N.*` key, or None if it is not one."""
    match = re.fullmatch(rf"{re.escape(_HF_ENC)}(\d+)\.(.+)\.(weight|bias)", key)
    if match is None:
        return None
    index, module, kind = match.groups()
    reverse = {hf: fs for fs, hf in _LAYER_MODULES.items()}
    return f"{_ENC}layers.{index}.{reverse[module]}.{kind}" if module in reverse else None
