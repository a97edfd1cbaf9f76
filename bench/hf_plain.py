"""A plain `transformers.Trainer` fine-tuning script: the bare HF run of bench_overhead.

What a user would write by hand for the trial sweeper's HF trainer runs: the prepared
token ids (`hf/{train,valid,test}.jsonl`, the same ids fairseq trains on), the trial's
initial weights, the same recipe (AdamW, linear warmup and decay, clipping, dropout,
batch, epochs, seed) and the same schedule (valid and test evaluated, and a checkpoint
saved, at every epoch end; the best by validation accuracy kept). Left out is all that
sweeper adds: metric events on stdout, checkpoint pruning, resuming, the parent process.

One thing comes from sweeper because there is no plain way to do it: the initial
weights are a fairseq-format checkpoint, converted by `sweeper.models.hf_init_model`
(once, before training, as sweeper's child does). Unlike sweeper's trainer, this script
keeps transformers' defaults that a plain script gets: the FLOP estimate per step,
full logits gathered for evaluation, `save_total_limit=2` instead of best-and-last,
no weight decay on biases and LayerNorm weights (speed-neutral).

  python bench/hf_plain.py --data DIR/hf --init INIT.pt --out DIR --epochs 5 --batch-size 8
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PAD_ID = 1  # fairseq's <pad>, which HF RoBERTa's position ids are derived from


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="prepared hf/ folder")
    parser.add_argument("--init", type=Path, required=True, help="fairseq-format init .pt")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--warmup-steps", type=int, default=0)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--attention-dropout", type=float, default=0.1)
    parser.add_argument("--adam-betas", type=float, nargs=2, default=[0.9, 0.98])
    parser.add_argument("--adam-eps", type=float, default=1e-6)
    parser.add_argument("--clip-norm", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
        help="transformers' own mixed-precision switches, as sweeper's trainer sets them",
    )  # fmt: skip
    return parser


def read_split(path: Path) -> list[dict]:
    import torch

    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [
        {"input_ids": torch.tensor(r["input_ids"], dtype=torch.long), "labels": int(r["label"])}
        for r in rows
    ]


def collate(items: list[dict]) -> dict:
    """Right-pad to the longest sequence of the batch, with an attention mask."""
    import torch

    width = max(len(item["input_ids"]) for item in items)
    ids = torch.full((len(items), width), PAD_ID, dtype=torch.long)
    mask = torch.zeros((len(items), width), dtype=torch.long)
    for row, item in enumerate(items):
        ids[row, : len(item["input_ids"])] = item["input_ids"]
        mask[row, : len(item["input_ids"])] = 1
    labels = torch.tensor([item["labels"] for item in items], dtype=torch.long)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def accuracy(prediction) -> dict[str, float]:
    import numpy as np

    predicted = np.asarray(prediction.predictions).argmax(-1)
    return {"accuracy": float((predicted == np.asarray(prediction.label_ids)).mean() * 100)}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch
    from transformers import Trainer, TrainingArguments, set_seed

    from sweeper.models import hf_init_model

    torch.set_num_threads(args.threads)
    set_seed(args.seed)
    data = {split: read_split(args.data / f"{split}.jsonl") for split in ("train", "valid", "test")}
    model = hf_init_model(args.init, args.dropout, args.attention_dropout)
    training = TrainingArguments(
        output_dir=str(args.out),
        seed=args.seed,
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=64,
        learning_rate=args.lr,
        lr_scheduler_type="linear",
        warmup_steps=args.warmup_steps,
        optim="adamw_torch_fused",
        adam_beta1=args.adam_betas[0],
        adam_beta2=args.adam_betas[1],
        adam_epsilon=args.adam_eps,
        weight_decay=args.weight_decay,
        max_grad_norm=args.clip_norm,
        logging_steps=25,
        eval_strategy="epoch",
        save_strategy="epoch",
        save_total_limit=2,
        metric_for_best_model="eval_valid_accuracy",
        greater_is_better=True,
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        use_cpu=not torch.cuda.is_available(),
        remove_unused_columns=False,
        bf16=args.precision == "bf16",
        fp16=args.precision == "fp16",
    )
    trainer = Trainer(
        model=model,
        args=training,
        train_dataset=data["train"],
        eval_dataset={"valid": data["valid"], "test": data["test"]},
        data_collator=collate,
        compute_metrics=accuracy,
    )
    output = trainer.train()
    print(f"plain hf done: {output.global_step} updates, {output.metrics}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
