"""The pretraining stage: fairseq `masked_lm` on the unlabeled corpus, once per sweep.

The `pretrained` init of the demo (and of any spec with `model.pretrain`) starts from a
RoBERTa that sweeper trains itself, so the lab's pretrained-vs-random question can be
asked without downloading weights. The result is a plain fairseq masked_lm checkpoint
(`encoder.sentence_encoder.*`, `encoder.lm_head.*`), which `sweeper.models.init`
turns into the trials' starting weights like any user-supplied checkpoint.

It is cached by content: the key hashes the binarized corpus (every byte), the
architecture and the pretraining recipe, so a second call, or a second sweep with the
same inputs, reuses `OUTPUT_DIR/pretrained/<key>/model.pt`. Training happens in a
temporary folder renamed into place at the end (`train_once`): a killed run never leaves
a half-written `model.pt` that a later call would take for finished. The left-to-right
objective (`sweeper.trainers.hf.roberta_causal_pretrain`) reuses the key, the inputs'
checks, the environment and `train_once`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from sweeper.spec.model_block import ArchConfig, PretrainConfig
from sweeper.spec.schema import SweepSpec
from sweeper.trainers.base import warmup_updates
from sweeper.trainers.devices import detect_device
from sweeper.trainers.fairseq.fairseq_checkpoints import LAST
from sweeper.trainers.fairseq.fairseq_trainer import CHILD_MODULE, arch_flags, parse_log_line
from sweeper.trainers.runner import (
    TrainerError,
    python_module_command,
    stream_process,
    thread_env,
)

Log = Callable[[str], None]
FORMAT_VERSION = 2
"""Bump when the same inputs would train a different checkpoint: old caches then miss."""
MODEL_FILE = "model.pt"
LOG_FILE = "train.log"
INFO_FILE = "pretrain.json"
PROGRESS_LINES = 20
"""Progress lines printed over a run (fairseq's log interval is steps / this)."""


class HasPretrainDir(Protocol):
    """What pretraining needs from `sweeper.data.PreparedData`."""

    @property
    def pretrain_dir(self) -> Path | None: ...


def pretrain(spec: SweepSpec, prepared: HasPretrainDir, log: Log = print) -> Path:
    """Path of the masked_lm checkpoint for the spec's `model.pretrain`, trained if needed."""
    config, data = pretrain_inputs(spec, prepared)
    arch = spec.model.arch
    final = Path(spec.output_dir) / "pretrained" / cache_key(data, arch, config)

    def train(work: Path) -> None:
        _train(masked_lm_args(data, arch, config, work / "checkpoints"), work, config, log)
        (work / "checkpoints" / LAST).replace(work / MODEL_FILE)
        shutil.rmtree(work / "checkpoints")

    return train_once(final, describe(arch, config, "masked LM"), train, log)


def describe(arch: ArchConfig, config: PretrainConfig, objective: str) -> str:
    """What a pretraining stage trains, for its first progress line."""
    return (
        f"{arch.layers}-layer {arch.embed_dim}-dim RoBERTa ({objective}): "
        f"{config.steps} steps of batch {config.batch_size}"
    )


def pretrain_inputs(spec: SweepSpec, prepared: HasPretrainDir) -> tuple[PretrainConfig, Path]:
    """The spec's pretraining recipe and the prepared corpus it reads, or ValueError
    when either is missing or the recipe's samples do not fit the architecture."""
    config = spec.model.pretrain
    data = prepared.pretrain_dir
    if config is None or data is None:
        raise ValueError("pretraining needs model.pretrain and prepared unlabeled data")
    arch = spec.model.arch
    if config.max_tokens_per_sample > arch.max_positions:
        raise ValueError(
            f"model.pretrain.max_tokens_per_sample ({config.max_tokens_per_sample}) exceeds "
            f"model.arch.max_positions ({arch.max_positions})"
        )
    return config, Path(data)


def cache_key(
    data: Path,
    arch: ArchConfig,
    config: PretrainConfig,
    variant: Mapping[str, Any] | None = None,
) -> str:
    """Hash of everything that determines the checkpoint (paths excluded: a moved corpus
    with the same bytes is the same corpus).

    `variant`: what another pretraining stage on the same inputs does differently (its
    objective, its own format version); it enters the hash only when given, so two
    stages never share a key while this stage's keys stay as they are. The recipe's
    `objective` field is left out for the same reason: it chooses the stage (whose
    `variant` says so), and the masked-LM keys stay those made before it existed.
    """
    digest = hashlib.sha256()
    recipe: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "arch": arch.model_dump(mode="json"),
        "pretrain": config.model_dump(mode="json", exclude={"objective"}),
    }
    if variant is not None:
        recipe["variant"] = dict(variant)
    digest.update(json.dumps(recipe, sort_keys=True).encode())
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(data)).encode() + b"\0")
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def masked_lm_args(
    data: Path, arch: ArchConfig, config: PretrainConfig, save_dir: Path
) -> list[str]:
    """fairseq-train arguments: RoBERTa's masked-LM recipe at the spec's size.

    One sentence per sample (`eos`), like the fine-tuning inputs: on the demo corpus,
    packing sentences into blocks (`complete`) cost 4x the time per step and learned
    no usable adjective polarity in 2,000 steps, while `eos` did. A sentence longer
    than max_tokens_per_sample - 1 tokens is skipped (fairseq warns). Adam (0.9, 0.98),
    weight decay 0.01, linear warmup and decay. Validation and saving happen only at
    the end (huge intervals): the run is short, its checkpoint is never resumed, and
    the final validation loss is the one number worth reporting.
    """
    has_valid = (data / "valid.idx").is_file()
    return [
        str(data),
        "--task", "masked_lm", "--criterion", "masked_lm",
        *arch_flags(arch.model_dump()),
        "--sample-break-mode", "eos",
        "--skip-invalid-size-inputs-valid-test",
        "--tokens-per-sample", str(config.max_tokens_per_sample),
        "--mask-prob", str(config.mask_prob),
        "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--adam-eps", "1e-06",
        "--weight-decay", "0.01", "--clip-norm", "0.0",
        "--lr", str(config.lr),
        "--lr-scheduler", "polynomial_decay",
        "--warmup-updates", str(warmup_updates(config.steps, config.warmup_ratio)),
        "--total-num-update", str(config.steps),
        "--max-update", str(config.steps),
        "--batch-size", str(config.batch_size),
        "--required-batch-size-multiple", "1",
        "--seed", str(config.seed),
        *(["--validate-interval", "1000000"] if has_valid else ["--disable-validation"]),
        "--save-interval", "1000000", "--no-epoch-checkpoints", "--no-save-optimizer-state",
        "--save-dir", str(save_dir),
        "--log-format", "json",
        "--log-interval", str(max(1, config.steps // PROGRESS_LINES)),
        "--num-workers", "0",
        *([] if detect_device() == "cuda" else ["--cpu"]),
    ]  # fmt: skip


def _train(args: list[str], work: Path, config: PretrainConfig, log: Log) -> None:
    """Run fairseq-train (through sweeper's launcher) with all cores, printing a line
    every `steps / PROGRESS_LINES` updates; its full log goes to `work/train.log`."""
    command = python_module_command(CHILD_MODULE, *args)
    started = time.monotonic()
    last_loss: list[float | None] = [None]

    def on_line(line: str) -> None:
        for event in parse_log_line(line, time.monotonic() - started):
            log(_progress(event.split, event.step, config.steps, event.loss, started))
            if event.split == "valid":
                last_loss[0] = event.loss

    with open(work / LOG_FILE, "w", encoding="utf-8") as out:
        ended = stream_process(command, pretrain_env(), out, on_line)
    if ended.code != 0:
        raise TrainerError(
            f"pretraining (fairseq masked_lm) exited with code {ended.code}", ended.tail
        )
    info = {"steps": config.steps, "seconds": round(time.monotonic() - started, 1)}
    info["valid_loss_nats"] = last_loss[0]
    (work / INFO_FILE).write_text(json.dumps(info, indent=2), encoding="utf-8")


def pretrain_env() -> dict[str, str]:
    """All cores, before the trials or beside them (the thread count changes the
    checkpoint, so it must not depend on where the stage runs; trials started beside it
    run at `sweeper.tune.pretrain_task.BESIDE_NICE`), with OpenMP threads that sleep
    rather than spin while waiting: spinning threads fight any other busy process for the cores,
    which slows pretraining down several-fold."""
    env = thread_env(os.cpu_count() or 1)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def _progress(split: str, step: int, steps: int, loss: float | None, started: float) -> str:
    shown = "?" if loss is None else f"{loss:.3f}"
    name = "valid loss" if split == "valid" else "loss"
    elapsed = time.monotonic() - started
    return f"  pretrain step {step}/{steps}  {name} {shown} (nats)  {elapsed:.0f} s"


def train_once(final: Path, what: str, train: Callable[[Path], None], log: Log) -> Path:
    """`final/model.pt`: the cached one, else run `train(work)` (which must leave
    `work/model.pt`) in a fresh temporary folder beside `final`, then move that folder
    into place as `final` in one rename. `what` is said before training.

    A killed run leaves no `final` behind (the temporary folder is removed on the way
    out), so a later call never takes a half-written `model.pt` for finished. If another
    process published the same key meanwhile, its identical result stands.
    """
    if (final / MODEL_FILE).is_file():
        log(f"pretrained checkpoint (cached): {final / MODEL_FILE}")
        return final / MODEL_FILE
    log(f"pretraining {what} -> {final}")
    work = final.parent / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        train(work)
        if not (work / MODEL_FILE).is_file():
            raise RuntimeError(f"pretraining left no {MODEL_FILE} in {work}")
        try:
            work.rename(final)
        except OSError:
            if not (final / MODEL_FILE).is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"pretrained checkpoint: {final / MODEL_FILE}")
    return final / MODEL_FILE
