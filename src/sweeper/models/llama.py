"""The small decoder of causal-LM sweeps: a Llama-style `LlamaForCausalLM` built here.

Nothing can be downloaded, so a causal-LM sweep either names a local HF causal-LM
folder or describes a small decoder with `model.arch` (layers, hidden size = embed_dim,
heads, intermediate size = ffn_dim, max positions), its vocabulary being the sweep's
sentencepiece pieces numbered as the fairseq dictionary numbers them (the ids every
prepared file holds). Starting weights are HF folders (`save_pretrained`), one per
(arch, seed) for `random` (drawn under the seed) and the pretraining stage's output
for `pretrained`, so trials of one seed share their starting point.

LoRA target modules (`lora.target_modules`) accept the lab reports' two choices by
shorthand: `attention` is the attention projections (`q_proj`, `k_proj`, `v_proj`,
`o_proj`), `all-linear` is every dense layer the reports list: those four, the MLP's
`gate_proj`, `up_proj`, `down_proj`, the embeddings `embed_tokens` and the output layer
`lm_head`. PEFT's own `"all-linear"` leaves the output layer out, hence sweeper's
explicit list.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import peft
    from transformers import LlamaConfig, LlamaForCausalLM

BOS_ID, PAD_ID, EOS_ID = 0, 1, 2
"""fairseq's special ids (`<s>`, `<pad>`, `</s>`), which the prepared ids use."""
ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
ALL_LINEAR = (*ATTENTION, "gate_proj", "up_proj", "down_proj", "embed_tokens", "lm_head")
SHORTHANDS = {"attention": ATTENTION, "all-linear": ALL_LINEAR}
FORMAT_VERSION = 1


def target_modules(names: Sequence[str]) -> list[str]:
    """`lora.target_modules` with the shorthands expanded, order kept, no repeats."""
    expanded = [module for name in names for module in SHORTHANDS.get(name, (name,))]
    return list(dict.fromkeys(expanded))


def llama_config(arch: Mapping[str, Any], vocab_size: int) -> LlamaConfig:
    """The decoder `model.arch` describes, over the sweep's vocabulary."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=int(arch["embed_dim"]),
        intermediate_size=int(arch["ffn_dim"]),
        num_hidden_layers=int(arch["layers"]),
        num_attention_heads=int(arch["heads"]),
        num_key_value_heads=int(arch["heads"]),
        max_position_embeddings=int(arch["max_positions"]),
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        tie_word_embeddings=False,
    )


def random_init(arch: Mapping[str, Any], vocab_size: int, seed: int, out_dir: Path) -> Path:
    """The `random` starting folder of a seed, written once (atomically) and reused."""
    import torch
    from transformers import LlamaForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()  # "Writing model shards", once per folder
    identity = {"arch": dict(arch), "vocab": vocab_size, "seed": seed, "v": FORMAT_VERSION}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    folder = out_dir / f"llama-random-s{seed}-{key}"
    if (folder / "config.json").is_file():
        return folder
    torch.manual_seed(seed)
    model = LlamaForCausalLM(llama_config(arch, vocab_size))
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        model.save_pretrained(tmp)
        try:
            os.replace(tmp, folder)
        except OSError:  # written meanwhile by another trial: the same weights
            if not (folder / "config.json").is_file():
                raise
        else:
            os.makedirs(tmp)  # TemporaryDirectory removes what it created
    return folder


def load_lm(folder: Path, dropout: float = 0.0) -> LlamaForCausalLM:
    """A causal LM from a local folder (sweeper's own or a user's `save_pretrained`)."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()  # a "Loading weights" bar per trial would bury the log
    return AutoModelForCausalLM.from_pretrained(str(folder), attention_dropout=dropout)


def lora_lm_config(lora: Mapping[str, Any]) -> peft.LoraConfig:
    """PEFT's `LoraConfig` for a causal LM from a trial's resolved `lora` block."""
    from peft import LoraConfig, TaskType

    return LoraConfig(
        task_type=TaskType.CAUSAL_LM,
        r=int(lora["r"]),
        lora_alpha=int(lora["alpha"]),
        lora_dropout=float(lora["dropout"]),
        target_modules=target_modules(lora["target_modules"]),
        bias=lora.get("bias", "none"),
    )


def apply_lm_lora(model: LlamaForCausalLM, lora: Mapping[str, Any]) -> peft.PeftModel:
    """Wrap a causal LM so only its LoRA adapters train."""
    import warnings

    from peft import get_peft_model

    with warnings.catch_warnings():  # as models.lora.apply_lora: PEFT's call, not ours
        warnings.filterwarnings(
            "ignore", message=".*is_gradient_checkpointing", category=FutureWarning
        )
        return get_peft_model(model, lora_lm_config(lora))


WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def lm_folder_problems(folder: Path, vocab_size: int | None) -> list[str]:
    """Why a local folder cannot be a causal-LM sweep's pretrained decoder (every
    problem at once): no config, no weights, not a `*ForCausalLM`, or fewer embedding
    rows than the sweep's dictionary numbers (sweeper encodes with `model.sentencepiece`
    and `model.dictionary`, so the folder must have been trained on those ids)."""
    config_file = folder / "config.json"
    if not config_file.is_file():
        return [f"{folder}: no config.json (expected a save_pretrained folder)"]
    problems = []
    if not any((folder / name).is_file() for name in WEIGHT_FILES):
        problems.append(f"{folder}: no weights ({' or '.join(WEIGHT_FILES)})")
    config = json.loads(config_file.read_text(encoding="utf-8"))
    kinds = config.get("architectures") or []
    if not any(str(kind).endswith("ForCausalLM") for kind in kinds):
        problems.append(f"{folder}: architectures {kinds} has no *ForCausalLM")
    rows = int(config.get("vocab_size", 0))
    if vocab_size is not None and rows < vocab_size:
        problems.append(
            f"{folder}: {rows} embedding rows, but model.dictionary numbers {vocab_size} ids"
        )
    return problems


def lm_param_counts(
    arch: Mapping[str, Any], vocab_size: int, loras: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """`sweeper params` of a causal-LM sweep: the decoder's parameters, and PEFT's
    (trainable, total) for each LoRA setting, counted on the real wrapped model."""
    from transformers import LlamaForCausalLM

    total = sum(p.numel() for p in LlamaForCausalLM(llama_config(arch, vocab_size)).parameters())
    rows = []
    for lora in loras:
        model = apply_lm_lora(LlamaForCausalLM(llama_config(arch, vocab_size)), lora)
        trainable, wrapped = model.get_nb_trainable_parameters()
        modules = target_modules(lora["target_modules"])
        rows.append({"lora": dict(lora), "target_modules": modules,
                     "trainable": int(trainable), "total": int(wrapped)})  # fmt: skip
    return {"model": "LlamaForCausalLM", "vocab_size": vocab_size, "total": total, "lora": rows}
