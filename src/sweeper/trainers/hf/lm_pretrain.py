"""The pretraining stage of a causal-LM sweep's `model.arch` decoder, once per sweep.

The `pretrained` init of a causal-LM sweep with `model.pretrain` is a Llama-style
decoder sweeper trains itself on the unlabeled corpus (next-token loss), as the
classification sweeps' RoBERTa is pretrained by fairseq
(`sweeper.trainers.fairseq.fairseq_pretrain`,
whose content-hash cache key, publish-by-rename and process streaming this reuses).
It starts from the random weights of `model.pretrain.seed`, runs in a child process
(`sweeper.trainers.hf.lm_main --pretrain`) with every core, and is cached as
`OUTPUT_DIR/pretrained/llama-<key>/` (`save_pretrained`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from sweeper.data.lm_task import LMData
from sweeper.models.llama import random_init
from sweeper.spec.schema import SweepSpec
from sweeper.trainers.base import warmup_updates
from sweeper.trainers.fairseq.fairseq_pretrain import cache_key, pretrain_env
from sweeper.trainers.runner import TrainerError, python_module_command, stream_process

Log = Callable[[str], None]
CHILD_MODULE = "sweeper.trainers.hf.lm_main"
DONE_FILE = "config.json"
LOG_FILE = "train.log"


def pretrain_lm(spec: SweepSpec, data: LMData, log: Log = print) -> Path:
    """The folder of the spec's pretrained decoder, trained if not cached."""
    config = spec.model.pretrain
    if config is None or data.pretrain is None:
        raise ValueError("pretraining needs model.pretrain and the unlabeled corpus")
    arch = spec.model.arch
    root = Path(spec.output_dir) / "pretrained"
    final = root / f"llama-{cache_key(data.pretrain.parent, arch, config)}"
    if (final / DONE_FILE).is_file():
        log(f"pretrained decoder (cached): {final}")
        return final
    log(f"pretraining a {arch.layers}-layer {arch.embed_dim}-dim decoder (next-token loss): "
        f"{config.steps} steps of batch {config.batch_size} -> {final}")  # fmt: skip
    work = root / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        settings = {
            "init": str(random_init(arch.model_dump(mode="json"), data.vocab_size, config.seed,
                                    root / "init")),
            "corpus": str(data.pretrain),
            "out": str(work / "model"),
            "steps": config.steps,
            "batch_size": config.batch_size,
            "lr": config.lr,
            "warmup_steps": warmup_updates(config.steps, config.warmup_ratio),
            "seed": config.seed,
            "max_tokens": min(config.max_tokens_per_sample, arch.max_positions),
            "threads": os.cpu_count() or 1,
        }  # fmt: skip
        (work / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
        run_pretrain_child(CHILD_MODULE, work / "settings.json", work, log, "causal LM")
        shutil.rmtree(work / "model" / "work", ignore_errors=True)
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            (work / "model").rename(final)
        except OSError:  # published meanwhile by another process: its identical result stands
            if not (final / DONE_FILE).is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"pretrained decoder: {final}")
    return final


def run_pretrain_child(module: str, settings: Path, work: Path, log: Log, what: str) -> None:
    """Run `python -m module --pretrain SETTINGS` with every core (the masked_lm stage's
    environment, `fairseq_pretrain.pretrain_env`), its output in `work/train.log`; each
    `pretrain step` line it prints (`lm_main.PretrainProgress`) is logged with the
    seconds since the start. A failed child is a TrainerError naming `what` and its tail."""
    command = python_module_command(module, "--pretrain", str(settings))
    started = time.monotonic()

    def on_line(line: str) -> None:
        if line.lstrip().startswith("pretrain step"):
            log(f"{line.rstrip()}  {time.monotonic() - started:.0f} s")

    with open(work / LOG_FILE, "w", encoding="utf-8") as out:
        ended = stream_process(command, pretrain_env(), out, on_line)
    if ended.code != 0:
        raise TrainerError(f"pretraining ({what}) exited with code {ended.code}", ended.tail)
