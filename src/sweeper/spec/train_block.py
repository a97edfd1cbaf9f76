"""`train:` and `lora:`: the fine-tuning recipe both frameworks get, and which fields
grid and search axes may vary."""

from __future__ import annotations

import difflib
from typing import Literal

from pydantic import (
    BaseModel,
    Field,
)

from sweeper.spec.model_block import OBJECTIVE_AXIS
from sweeper.spec.strict import Strict

Precision = Literal["fp32", "fp16", "bf16"]


class TrainConfig(Strict):
    """The fine-tuning recipe; both frameworks get these same numbers."""

    epochs: int = Field(5, ge=1)
    """Passes over the training split. Validation and test are measured at the end of
    each epoch; updates in all: epochs × ceil(training examples / batch_size)."""
    batch_size: int = Field(8, ge=1)
    """Training examples per update, exactly (fairseq and HF alike; evaluation batches are
    fixed separately)."""
    lr: float = Field(1e-5, gt=0)
    """Peak learning rate, reached after warmup, then decayed linearly to 0 at the last
    update."""
    warmup_ratio: float = Field(0.06, ge=0, lt=1)
    """Fraction of the total updates spent warming the learning rate up."""
    lr_scheduler: Literal["polynomial", "linear"] = "polynomial"
    """Decay after warmup (polynomial with power 1 is linear, as in fairseq)."""
    weight_decay: float = Field(0.1, ge=0)
    """Decoupled (AdamW) weight decay, applied to every parameter, biases and LayerNorm
    included, as fairseq's adam does (transformers' own default would exempt them)."""
    dropout: float = Field(0.1, ge=0, lt=1)
    """Dropout probability of the encoder's hidden layers (fairseq `--dropout`, HF
    `hidden_dropout_prob`). Not used with `task: causal_lm` (see `attention_dropout`)."""
    attention_dropout: float = Field(0.1, ge=0, lt=1)
    """Dropout probability on attention weights (fairseq `--attention-dropout`, HF
    `attention_probs_dropout_prob`; with `task: causal_lm`, the decoder's only dropout)."""
    adam_betas: tuple[float, float] = (0.9, 0.98)
    """Adam's (beta1, beta2): decay rates of the gradient's running mean and square."""
    adam_eps: float = Field(1e-6, gt=0)
    """Adam's epsilon, added to the denominator for numerical stability."""
    clip_norm: float = Field(0.0, ge=0)
    """Gradient clipping norm; 0 disables it."""
    num_classes: int = Field(2, ge=2)
    """Outputs of the classifier head; at least the number of labels in the data (exit 2
    before anything runs otherwise). Unset: the number of an explicit `data.labels` list
    (2 for the default), and 2 with `data.labels: auto`, whose labels are only known once
    the data is read: set it then for more than two classes. Not used with
    `task: causal_lm`."""
    precision: Precision = "fp32"
    """Arithmetic of fine-tuning (not of the pretraining stage): `fp32`; `bf16` (CPUs with
    AVX-512 BF16 or AMX run it natively, older ones emulate it slowly; CUDA from Ampere
    on); `fp16` (CUDA only: a spec asking for it without `resources.gpu` is refused).
    Mapped to fairseq's `--bf16`/`--fp16` and transformers' `bf16`/`fp16`. A grid axis
    like any other; part of the trial key when not fp32."""
    timeout_min: float | None = Field(None, gt=0)
    """Per-trial wall-clock limit in minutes; a trial past it fails with that reason."""


class LoraConfig(Strict):
    """PEFT LoRA settings, used by trials whose method is `lora`."""

    r: int = Field(8, ge=1)
    """Rank of the adapter matrices: more is more trainable parameters (PEFT `r`)."""
    alpha: int = Field(16, ge=1)
    """Scaling of the adapters' update, applied as alpha / r (PEFT `lora_alpha`)."""
    dropout: float = Field(0.05, ge=0, lt=1)
    """Dropout probability on the adapters' input (PEFT `lora_dropout`)."""
    target_modules: list[str] = Field(default_factory=lambda: ["query", "value"], min_length=1)
    """Names of the modules that get adapters (default: RoBERTa attention's query and
    value projections). `task: causal_lm` also takes `attention` (`q_proj, k_proj, v_proj,
    o_proj`) and `all-linear` (those, the MLP's three, `embed_tokens` and `lm_head`)."""
    bias: Literal["none", "all", "lora_only"] = "none"
    """Which biases train too (PEFT `bias`): none, all of them, or those of the adapted
    modules only."""


def check_tunable(key: str) -> None:
    """Grid and search axes may vary recipe fields (`train.*`), LoRA fields (`lora.*`)
    and the pretraining objective (`model.pretrain.objective`: a trial's starting
    weights, chosen among checkpoints pretrained once each)."""
    if key == OBJECTIVE_AXIS:
        return
    blocks: dict[str, type[BaseModel]] = {"train": TrainConfig, "lora": LoraConfig}
    block, _, name = key.partition(".")
    if block not in blocks or name not in blocks[block].model_fields:
        known = [f"{b}.{f}" for b, m in blocks.items() for f in m.model_fields]
        close = difflib.get_close_matches(key, [*known, OBJECTIVE_AXIS], n=1)
        hint = (
            f"; did you mean {close[0]!r}?" if close else f" (train.*, lora.* or {OBJECTIVE_AXIS})"
        )
        raise ValueError(f"{key!r} is not a tunable field{hint}")
