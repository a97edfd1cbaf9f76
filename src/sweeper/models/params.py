"""Exact parameter counts of the real fairseq and HF models, by component.

The lab's reports disagreed on the size of the same model (22,807,552 / 22,675,456 /
22,829,056) because each counted by hand under a different convention. Here every number
is summed from the parameters of the models the trainers build (`sweeper.models.arch`),
each parameter is attributed to exactly one component (an unattributed one is an
error, so the breakdown always adds up), and the hand conventions are derived from that
breakdown with their rule spelt out, so a reader sees why the figures differ.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from sweeper.models.arch import HEAD_NAME, build_fairseq_model, hf_config, position_rows
from sweeper.models.lora import lora_trainable_params
from sweeper.spec.model_block import ArchConfig

ENCODER_COMPONENTS: tuple[tuple[str, str | None, str | None], ...] = (
    # (component, fairseq name pattern, HF name pattern); None: the framework has none.
    ("token embeddings", r"embed_tokens\.weight", r"word_embeddings\.weight"),
    ("position embeddings", r"embed_positions\.weight", r"position_embeddings\.weight"),
    ("token-type embeddings", None, r"token_type_embeddings\.weight"),
    ("embedding layer norm", r"layernorm_embedding\.\w+", r"embeddings\.LayerNorm\.\w+"),
    (
        "attention q/k/v/out weights",
        r"self_attn\.[qkv]_proj\.weight|self_attn\.out_proj\.weight",
        r"attention\.self\.(query|key|value)\.weight|attention\.output\.dense\.weight",
    ),
    (
        "attention q/k/v/out biases",
        r"self_attn\.[qkv]_proj\.bias|self_attn\.out_proj\.bias",
        r"attention\.self\.(query|key|value)\.bias|attention\.output\.dense\.bias",
    ),
    ("attention layer norm", r"self_attn_layer_norm\.\w+", r"attention\.output\.LayerNorm\.\w+"),
    ("FFN weights", r"fc[12]\.weight", r"(intermediate|\d+\.output)\.dense\.weight"),
    ("FFN biases", r"fc[12]\.bias", r"(intermediate|\d+\.output)\.dense\.bias"),
    ("FFN layer norm", r"final_layer_norm\.\w+", r"\d+\.output\.LayerNorm\.\w+"),
)
"""Encoder components; a name matches a component when its pattern matches its end."""

FRAMEWORKS = ("fairseq", "hf")


@dataclass(frozen=True)
class Convention:
    """One way of counting by hand, with the reports that used it."""

    name: str
    reports: str
    count: int
    rule: str


@dataclass
class ParamReport:
    """Everything `sweeper params` shows, as plain data (the JSON output is this)."""

    arch: dict[str, Any]
    vocab_size: int
    num_classes: int
    components: dict[str, dict[str, int | None]]
    """component -> {"fairseq": n, "hf": n}; None where the framework has no such part."""
    totals: dict[str, dict[str, int]]
    """encoder / classification head / LM head / fine-tuning model -> per framework."""
    conventions: list[Convention]
    heads: dict[str, dict[str, int]]
    """classification head / LM head -> `outputs` (what it chooses among: the classes,
    or the vocabulary's tokens that pretraining predicts, masked or next), `output layer`
    (its last projection: outputs x (embed_dim + 1), the LM head's weight being the
    token embeddings, tied) and `parameters` (the whole head, that weight included).
    The same in both frameworks: the conversion maps them tensor for tensor."""
    lora: list[dict[str, Any]] = field(default_factory=list)
    """Per distinct LoRA setting: its settings, trainable and total parameters (HF)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _component_of(name: str, framework: str) -> str:
    """The encoder component a parameter name belongs to; ValueError if none does."""
    column = FRAMEWORKS.index(framework) + 1
    found = [
        row[0]
        for row in ENCODER_COMPONENTS
        if row[column] is not None and re.search(rf"(^|\.)({row[column]})$", name)
    ]
    if len(found) != 1:
        raise ValueError(f"{framework} parameter {name!r} matches components {found}")
    return found[0]


def count_by_component(module: Any, framework: str) -> dict[str, int]:
    """Parameters of an encoder module, summed per component (tied weights once)."""
    counts = dict.fromkeys((row[0] for row in ENCODER_COMPONENTS), 0)
    for name, param in module.named_parameters():
        counts[_component_of(name, framework)] += param.numel()
    return counts


def count(module: Any) -> int:
    """All distinct parameters of a module (a tied weight counts once, as in PyTorch)."""
    return sum(param.numel() for param in module.parameters())


def _lm_head_count(lm_head: Any) -> int:
    """LM head parameters excluding the output weight tied to the token embeddings."""
    return count(lm_head.dense) + count(lm_head.layer_norm) + lm_head.bias.numel()


def _head_counts(model: Any) -> dict[str, dict[str, int]]:
    """`ParamReport.heads` of a fairseq `RobertaModel` with its classification head."""
    classifier, lm_head = model.classification_heads[HEAD_NAME], model.encoder.lm_head
    return {
        "classification head": {
            "outputs": classifier.out_proj.out_features,
            "output layer": count(classifier.out_proj),
            "parameters": count(classifier),
        },
        "LM head": {
            "outputs": lm_head.weight.shape[0],
            "output layer": lm_head.weight.numel() + lm_head.bias.numel(),
            "parameters": _lm_head_count(lm_head) + lm_head.weight.numel(),
        },
    }


def fairseq_counts(arch: ArchConfig, vocab_size: int, num_classes: int) -> dict[str, Any]:
    """Component counts and totals of fairseq's `RobertaModel` with a classification head."""
    model = build_fairseq_model(arch, vocab_size, num_classes)
    encoder = model.encoder.sentence_encoder
    return {
        "heads": _head_counts(model),
        "components": count_by_component(encoder, "fairseq"),
        "encoder": count(encoder),
        "classification head": count(model.classification_heads[HEAD_NAME]),
        "LM head": _lm_head_count(model.encoder.lm_head),
        "model": count(model),  # as fine-tuned: the unused LM head stays in fairseq's model
    }


def hf_counts(arch: ArchConfig, vocab_size: int, num_classes: int) -> dict[str, Any]:
    """Component counts and totals of HF's RoBERTa (`RobertaModel` without pooler)."""
    from transformers import RobertaForMaskedLM
    from transformers.models.roberta.modeling_roberta import RobertaClassificationHead

    config = hf_config(arch, vocab_size, num_classes)
    model = RobertaForMaskedLM(config)  # its `roberta` is RobertaModel(add_pooling_layer=False)
    head = RobertaClassificationHead(config)  # RobertaForSequenceClassification's head
    return {
        "components": count_by_component(model.roberta, "hf"),
        "encoder": count(model.roberta),
        "classification head": count(head),
        "LM head": _lm_head_count(model.lm_head),
        # RobertaForSequenceClassification is exactly this encoder + this head.
        "model": count(model.roberta) + count(head),
    }


def conventions(components: dict[str, int], arch: ArchConfig, encoder: int) -> list[Convention]:
    """The lab's hand-computed figures, derived from fairseq's real component counts."""
    rows = position_rows(arch)
    weights = (
        components["token embeddings"]
        + components["position embeddings"]
        + components["attention q/k/v/out weights"]
        + components["FFN weights"]
    )
    return [
        Convention(
            "weights only",
            "000, 001",
            weights,
            f"token + position embeddings ({rows} rows) + attention and FFN weight "
            "matrices; no biases, no layer norms",
        ),
        Convention(
            "all parameters",
            "002",
            encoder,
            "every parameter of fairseq's encoder (encoder.sentence_encoder), biases and "
            "layer norms included; no heads",
        ),
        Convention(
            "positions excluded",
            "003",
            weights - components["position embeddings"],
            f"weights only, minus the {rows}×{arch.embed_dim} position table "
            "(as if positions were sinusoidal)",
        ),
    ]


def param_report(
    arch: ArchConfig,
    vocab_size: int,
    num_classes: int = 2,
    lora_settings: list[dict[str, Any]] | None = None,
) -> ParamReport:
    """Count both real models (and each LoRA setting's trainable parameters)."""
    per = {"fairseq": fairseq_counts(arch, vocab_size, num_classes)}
    per["hf"] = hf_counts(arch, vocab_size, num_classes)
    components: dict[str, dict[str, int | None]] = {}
    for name, fairseq_pattern, hf_pattern in ENCODER_COMPONENTS:
        components[name] = {
            "fairseq": per["fairseq"]["components"][name] if fairseq_pattern else None,
            "hf": per["hf"]["components"][name] if hf_pattern else None,
        }
    totals = {
        key: {fw: per[fw][key] for fw in FRAMEWORKS}
        for key in ("encoder", "classification head", "LM head", "model")
    }
    lora_rows = []
    for settings in lora_settings or []:
        config = hf_config(arch, vocab_size, num_classes)
        trainable, total = lora_trainable_params(config, settings)
        lora_rows.append({"settings": settings, "trainable": trainable, "total": total})
    return ParamReport(
        arch=arch.model_dump(mode="json"),
        vocab_size=vocab_size,
        num_classes=num_classes,
        components=components,
        totals=totals,
        conventions=conventions(per["fairseq"]["components"], arch, per["fairseq"]["encoder"]),
        heads=per["fairseq"]["heads"],
        lora=lora_rows,
    )
