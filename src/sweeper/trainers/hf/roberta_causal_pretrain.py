"""The left-to-right (causal LM) pretraining stage of the classifier's RoBERTa.

The other objective beside fairseq's masked LM (`sweeper.trainers.fairseq.fairseq_pretrain`,
`pretrain`): `pretrain_causal(spec, prepared, log)` takes the same inputs and returns
the same kind of file, a fairseq-format `model.pt` that `sweeper.models.init` turns into
both frameworks' starting weights, so a sweep can ask whether a bidirectional or a
left-to-right pretraining makes the better classifier. fairseq has no left-to-right
RoBERTa, so HF trains it natively (`RobertaForCausalLM`, `is_decoder=True`) in a child
process with every core (`sweeper.trainers.hf.roberta_causal_main`, which says what it
shares with the masked-LM stage: corpus, initial weights, recipe), and its weights are
converted back to fairseq's names.

Cached like the masked-LM checkpoint (its content-hash key, with this objective and
format in the hash and the objective in the folder's name, so the two never share a
folder): `OUTPUT_DIR/pretrained/causal_lm-<key>/` holds `model.pt`, the HF folder `hf/`
it was converted from, `pretrain.json` (steps, seconds, the final training and
validation losses) and `train.log`. It is trained in a temporary folder renamed into
place at the end (`fairseq_pretrain.train_once`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from sweeper.spec.model_block import ArchConfig, PretrainConfig
from sweeper.spec.schema import SweepSpec
from sweeper.trainers.base import warmup_updates
from sweeper.trainers.fairseq.fairseq_pretrain import (
    INFO_FILE,
    HasPretrainDir,
    cache_key,
    describe,
    pretrain_inputs,
    train_once,
)
from sweeper.trainers.hf.lm_pretrain import run_pretrain_child

Log = Callable[[str], None]
OBJECTIVE = "causal_lm"
FORMAT_VERSION = 1
"""Bump when the same inputs would train a different checkpoint: old caches then miss."""
CHILD_MODULE = "sweeper.trainers.hf.roberta_causal_main"
RESULT_FILE = "result.json"
"""What the child learned (its final losses), folded into pretrain.json by the parent."""


def pretrain_causal(spec: SweepSpec, prepared: HasPretrainDir, log: Log = print) -> Path:
    """Path of the causal-LM checkpoint for the spec's `model.pretrain`, trained if needed."""
    config, data = pretrain_inputs(spec, prepared)
    arch = spec.model.arch
    final = Path(spec.output_dir) / "pretrained" / causal_cache_key(data, arch, config)

    def train(work: Path) -> None:
        _train(data, arch, config, work, log)

    return train_once(final, describe(arch, config, "causal LM"), train, log)


def causal_cache_key(data: Path, arch: ArchConfig, config: PretrainConfig) -> str:
    """The cache folder's name: the masked-LM stage's key over the same inputs, with this
    objective and its format version hashed in, prefixed by the objective."""
    variant = {"objective": OBJECTIVE, "format": FORMAT_VERSION}
    return f"{OBJECTIVE}-{cache_key(data, arch, config, variant)}"


def _train(data: Path, arch: ArchConfig, config: PretrainConfig, work: Path, log: Log) -> None:
    """Run the child into `work`, then write `pretrain.json` beside its `model.pt`."""
    settings = {
        "arch": arch.model_dump(mode="json"),
        "corpus": str(data),
        "out": str(work),
        "steps": config.steps,
        "batch_size": config.batch_size,
        "lr": config.lr,
        "warmup_steps": warmup_updates(config.steps, config.warmup_ratio),
        "seed": config.seed,
        "max_tokens": config.max_tokens_per_sample,
        "threads": os.cpu_count() or 1,
    }
    (work / "settings.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    started = time.monotonic()
    run_pretrain_child(CHILD_MODULE, work / "settings.json", work, log, "RoBERTa causal LM")
    learned = json.loads((work / RESULT_FILE).read_text(encoding="utf-8"))
    info = {
        "objective": OBJECTIVE,
        "steps": config.steps,
        "seconds": round(time.monotonic() - started, 1),
        **learned,
    }
    (work / INFO_FILE).write_text(json.dumps(info, indent=2), encoding="utf-8")
    for scratch in (RESULT_FILE, "settings.json"):  # both name the temporary folder
        (work / scratch).unlink()
