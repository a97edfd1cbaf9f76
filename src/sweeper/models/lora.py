"""LoRA on the HF classifier: one place that turns a spec's `lora` block into PEFT.

The HF trainer wraps its model with `apply_lora`, and `sweeper params` counts with
`lora_trainable_params`, which builds the same wrapping: the trainable count shown next
to the accuracy is then the count of the model that trained, not a formula.
PEFT's SEQ_CLS task keeps the classification head (`classifier`) fully trainable
(`modules_to_save`), which is why the count is larger than the adapters alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sweeper.spec.train_block import LoraConfig as SpecLora

if TYPE_CHECKING:
    import peft
    from torch import nn
    from transformers import RobertaConfig


def lora_settings(lora: SpecLora | Mapping[str, Any]) -> SpecLora:
    """Accept the spec's `LoraConfig` or a trial's resolved `lora` dict; validate either."""
    return lora if isinstance(lora, SpecLora) else SpecLora.model_validate(dict(lora))


def peft_config(lora: SpecLora | Mapping[str, Any]) -> peft.LoraConfig:
    """PEFT's `LoraConfig` for sequence classification from the spec's settings."""
    from peft import LoraConfig, TaskType

    settings = lora_settings(lora)
    return LoraConfig(
        task_type=TaskType.SEQ_CLS,
        r=settings.r,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=list(settings.target_modules),
        bias=settings.bias,
    )


def apply_lora(model: nn.Module, lora: SpecLora | Mapping[str, Any]) -> peft.PeftModel:
    """Wrap an HF `RobertaForSequenceClassification` so only LoRA (+ head) train."""
    import warnings

    from peft import get_peft_model

    with warnings.catch_warnings():
        # PEFT 0.21 calls an API transformers 5 deprecated; the warning is not ours to fix.
        warnings.filterwarnings(
            "ignore", message=".*is_gradient_checkpointing", category=FutureWarning
        )
        return get_peft_model(model, peft_config(lora))


def lora_trainable_params(
    config: RobertaConfig, lora: SpecLora | Mapping[str, Any]
) -> tuple[int, int]:
    """(trainable, total) parameters of the LoRA-wrapped classifier, as PEFT reports them.

    The total is PEFT's: it includes the adapters and the trainable copy of the head
    that `modules_to_save` keeps beside the frozen original.
    """
    from transformers import RobertaForSequenceClassification

    model = apply_lora(RobertaForSequenceClassification(config), lora)
    trainable, total = model.get_nb_trainable_parameters()
    return int(trainable), int(total)
