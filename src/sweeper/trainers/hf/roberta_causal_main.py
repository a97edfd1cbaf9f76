"""The causal-objective pretraining child: `python -m sweeper.trainers.hf.roberta_causal_main
--pretrain SETTINGS.json` (`sweeper.trainers.hf.roberta_causal_pretrain` runs it).

It trains the spec's `model.arch` RoBERTa left to right: `RobertaForCausalLM` with
`is_decoder=True` is the very network of the masked-LM stage (same tensors, same names,
the LM head tied to the token embeddings) whose self-attention sees only earlier
positions, trained on the next token's loss. What stays the masked-LM stage's, so that
the objective is the one difference between the two checkpoints:

- the corpus: the binarized `fairseq/pretrain/` splits that `fairseq-train --task
  masked_lm` reads, one sentence per sample (`<s>` + the sentence + `</s>`, fairseq's
  `--sample-break-mode eos`); a sample longer than `max_tokens_per_sample` is skipped,
  as fairseq skips it;
- the starting weights: the ones `fairseq-train --seed SEED` builds for masked_lm (it
  seeds torch, then builds the model, as `sweeper.models.init.initial_state` does);
- the recipe: Adam (0.9, 0.98), eps 1e-6, weight decay 0.01 on every parameter, no
  clipping, linear warmup then linear decay to 0, dropout 0.1, `steps` updates of
  `batch_size` samples, all cores.

HF's token-type embedding (one row, zeros: fairseq has none) is frozen, so the network
stays fairseq's and the conversion back is exact. The child writes the trained model
as an HF folder (`hf/`), as the fairseq `model.pt` that `sweeper.models.init` starts
trials from (`sweeper.models.hf_import.write_converted`), and `result.json`: the last
logged training loss and the validation loss at the end (mean next-token loss in nats;
not comparable with a masked-LM loss, which predicts other tokens).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import PrinterCallback, RobertaForCausalLM, TrainingArguments

from sweeper.data.binarize import DICT_FILE, read_indexed
from sweeper.models.arch import BOS, hf_config, vocab_size_from_dict
from sweeper.models.convert import fairseq_to_hf
from sweeper.models.hf_import import write_converted
from sweeper.models.init import initial_state
from sweeper.quick_exit import exit_now
from sweeper.spec.model_block import ArchConfig
from sweeper.trainers.base import EVAL_BATCH_SIZE
from sweeper.trainers.fairseq.fairseq_pretrain import MODEL_FILE, PROGRESS_LINES
from sweeper.trainers.hf.hf_main import FairseqRecipeTrainer
from sweeper.trainers.hf.lm_data import IGNORE, collate
from sweeper.trainers.hf.lm_main import PretrainProgress
from sweeper.trainers.hf.roberta_causal_pretrain import OBJECTIVE, RESULT_FILE

HF_DIR = "hf"


def causal_model(arch: ArchConfig, vocab_size: int, seed: int) -> RobertaForCausalLM:
    """The left-to-right RoBERTa holding the encoder and LM head that the masked-LM
    stage starts from under `seed` (converted from fairseq's own random init)."""
    # initial_state also draws a classification head (from its own seed): dropped here.
    state = initial_state(arch, vocab_size, 2, "random", seed, None)
    config = hf_config(arch, vocab_size)
    config.is_decoder = True
    model = RobertaForCausalLM(config)
    model.load_state_dict(fairseq_to_hf(state, head=None, lm_head=True), strict=True)
    model.roberta.embeddings.token_type_embeddings.weight.requires_grad_(False)
    return model


def samples(prefix: Path, max_tokens: int) -> tuple[list[dict[str, list[int]]], int]:
    """(`<s>` + sentence + `</s>` per item of `prefix`, as inputs and labels; how many
    were skipped for being longer than `max_tokens`)."""
    rows = [[BOS, *item] for item in read_indexed(prefix)]
    kept = [{"input_ids": ids, "labels": ids} for ids in rows if len(ids) <= max_tokens]
    return kept, len(rows) - len(kept)


def next_token_losses(
    model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> torch.Tensor:
    """Loss (nats) of predicting token t + 1 at each position t, shape (batch, length - 1);
    0 where token t + 1 is padding. The sum over real tokens is what training averages."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    targets = input_ids[:, 1:].masked_fill(attention_mask[:, 1:] == 0, IGNORE)
    return torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), targets, ignore_index=IGNORE, reduction="none"
    )


@torch.no_grad()
def mean_loss(model: torch.nn.Module, rows: list[dict[str, list[int]]]) -> float | None:
    """Mean next-token loss (nats) over every real token of `rows`, dropout off."""
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(rows), EVAL_BATCH_SIZE):
        batch = collate(rows[start : start + EVAL_BATCH_SIZE])
        mask = batch["attention_mask"]
        total += float(next_token_losses(model, batch["input_ids"], mask).sum())
        count += int(mask[:, 1:].sum())
    return total / count if count else None


def training_arguments(settings: dict[str, Any], out: Path) -> TrainingArguments:
    """The masked-LM stage's fairseq recipe (`fairseq_pretrain.masked_lm_args`) in HF."""
    steps = int(settings["steps"])
    return TrainingArguments(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=int(settings["batch_size"]),
        learning_rate=float(settings["lr"]),
        warmup_steps=int(settings["warmup_steps"]),
        lr_scheduler_type="linear",
        adam_beta1=0.9,
        adam_beta2=0.98,
        adam_epsilon=1e-6,
        weight_decay=0.01,
        max_grad_norm=0.0,
        logging_steps=max(1, steps // PROGRESS_LINES),  # as many lines as the masked LM's
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(),
        seed=int(settings["seed"]),
        dataloader_num_workers=0,
        remove_unused_columns=False,
    )


def pretrain(settings: dict[str, Any]) -> None:
    """Train as `settings` say and write `hf/`, `model.pt` and `result.json` into
    `settings["out"]` (the parent publishes that folder into the cache)."""
    torch.set_num_threads(max(1, int(settings["threads"])))
    transformers.logging.set_verbosity_warning()
    transformers.utils.logging.disable_progress_bar()
    transformers.set_seed(int(settings["seed"]))
    corpus, out = Path(settings["corpus"]), Path(settings["out"])
    limit = int(settings["max_tokens"])
    train, skipped = samples(corpus / "train", limit)
    valid = samples(corpus / "valid", limit)[0] if (corpus / "valid.idx").is_file() else []
    if not train:
        raise ValueError(f"{corpus}/train: no sentence fits max_tokens_per_sample {limit}")
    arch = ArchConfig.model_validate(settings["arch"])
    model = causal_model(arch, vocab_size_from_dict(corpus / DICT_FILE), int(settings["seed"]))
    trainer = FairseqRecipeTrainer(
        model=model,
        args=training_arguments(settings, out / "trainer"),
        train_dataset=train,
        data_collator=collate,
    )
    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(PretrainProgress())
    trainer.train()
    shutil.rmtree(out / "trainer", ignore_errors=True)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    result = {
        "train_loss_nats": losses[-1] if losses else None,
        "valid_loss_nats": mean_loss(model, valid),
        "train_samples": len(train),
        "skipped_too_long": skipped,
    }
    print(f"pretrain done: {json.dumps(result, sort_keys=True)}", flush=True)
    model.save_pretrained(out / HF_DIR)
    source = {"objective": OBJECTIVE, "architecture": type(model).__name__}
    write_converted(model.state_dict(), source, out / MODEL_FILE)
    (out / RESULT_FILE).write_text(json.dumps(result, indent=2), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "--pretrain":
        print(
            "usage: python -m sweeper.trainers.hf.roberta_causal_main --pretrain SETTINGS.json",
            file=sys.stderr,
        )
        return 2
    pretrain(json.loads(Path(args[1]).read_text(encoding="utf-8")))
    return 0


if __name__ == "__main__":
    exit_now(main())
