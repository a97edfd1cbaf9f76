"""RoBERTa in both frameworks: configs, exact parameter counts, weight conversion, inits.

  arch.py       one `ArchConfig` -> fairseq's real `RobertaModel`, its `fairseq-train`
                flags, and the equivalent HF `RobertaConfig`
  params.py     parameter counts of both real models by component, and the lab's hand
                conventions derived from them (`sweeper params`)
  convert.py    fairseq state dict <-> HF RoBERTa-family weights, by one table of names
  init.py       the one starting checkpoint per (arch, init, seed) both frameworks load
  hf_import.py  a HuggingFace model folder as the pretrained checkpoint
  lora.py       the spec's `lora` block as PEFT, and its trainable-parameter count
  llama.py      the small decoder of causal-LM sweeps (`LlamaForCausalLM` from the spec)

The public names below are imported lazily, so `import sweeper.models` stays free of
torch, fairseq and transformers until one of them is used (docs/architecture.md, invariant 4).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "fairseq_arch_args": "arch",
    "build_fairseq_model": "arch",
    "hf_config": "arch",
    "vocab_size_from_dict": "arch",
    "HEAD_NAME": "arch",
    "param_report": "params",
    "fairseq_to_hf": "convert",
    "init_checkpoint": "init",
    "hf_init_state": "init",
    "hf_init_model": "init",
    "fairseq_init_model": "init",
    "apply_lora": "lora",
    "lora_trainable_params": "lora",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'sweeper.models' has no attribute {name!r}")
    return getattr(importlib.import_module(f"sweeper.models.{_EXPORTS[name]}"), name)
