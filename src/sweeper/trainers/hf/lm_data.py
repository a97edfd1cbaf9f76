"""Prompt/answer batches and the causal-LM measurements, shared by the trial process
(`sweeper.trainers.hf.lm_main`) and `summarize --evaluate`'s reload, so the recorded and
the re-measured numbers come from one function.

A training example is `<s> prompt answer </s>`; its labels are -100 (ignored) on `<s>`
and the prompt, so the loss is the answer's (and its closing `</s>`) only. Validation
and test report that loss (mean negative log-likelihood per answer token, nats), its
perplexity `exp(loss)`, and exact match: the percentage of prompts whose greedy
continuation, up to its first `</s>`, is exactly the answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from sweeper.data.lm_task import read_jsonl
from sweeper.models.llama import BOS_ID, EOS_ID, PAD_ID
from sweeper.trainers.metrics import accuracy_percent

IGNORE = -100
EVAL_BATCH = 32


class AnswerDataset(torch.utils.data.Dataset):
    """Rows of a prepared `{split}.jsonl` as model inputs with answer-only labels."""

    def __init__(self, rows: Sequence[dict[str, list[int]]]):
        self.rows = list(rows)

    @classmethod
    def read(cls, path: Any) -> AnswerDataset:
        return cls(read_jsonl(path))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, list[int]]:
        row = self.rows[index]
        ids = [BOS_ID, *row["prompt"], *row["answer"], EOS_ID]
        labels = [IGNORE] * (1 + len(row["prompt"])) + [*row["answer"], EOS_ID]
        return {"input_ids": ids, "labels": labels}


def collate(items: Sequence[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
    """Right-padded batch: pad ids, -100 labels, attention mask 0 on padding."""
    width = max(len(item["input_ids"]) for item in items)

    def pad(values: list[int], fill: int) -> list[int]:
        return values + [fill] * (width - len(values))

    return {
        "input_ids": torch.tensor([pad(i["input_ids"], PAD_ID) for i in items]),
        "labels": torch.tensor([pad(i["labels"], IGNORE) for i in items]),
        "attention_mask": torch.tensor([pad([1] * len(i["input_ids"]), 0) for i in items]),
    }


@torch.no_grad()
def measure(
    model: torch.nn.Module, dataset: AnswerDataset, device: str = "cpu"
) -> dict[str, float]:
    """`loss`, `perplexity` and `exact_match` (%) of `model` on `dataset`; exact match is
    `metrics.accuracy_percent` of the counts (0 on an empty split), as every accuracy."""
    was_training = model.training
    model.eval()
    nll, tokens, matches = 0.0, 0, 0
    for start in range(0, len(dataset), EVAL_BATCH):
        rows = dataset.rows[start : start + EVAL_BATCH]
        batch = collate([dataset[start + i] for i in range(len(rows))])
        batch = {k: v.to(device) for k, v in batch.items()}
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        labels = batch["labels"][:, 1:]
        losses = torch.nn.functional.cross_entropy(
            logits[:, :-1].transpose(1, 2).float(), labels, ignore_index=IGNORE, reduction="sum"
        )
        nll += float(losses)
        tokens += int((labels != IGNORE).sum())
        matches += sum(
            got == row["answer"] for got, row in zip(greedy(model, rows, device), rows, strict=True)
        )
    model.train(was_training)
    loss = nll / max(1, tokens)
    return {
        "loss": loss,
        "perplexity": math.exp(min(loss, 50.0)),
        "exact_match": accuracy_percent(matches, len(dataset)) if len(dataset) else 0.0,
    }


def greedy(
    model: torch.nn.Module, rows: Sequence[dict[str, list[int]]], device: str
) -> list[list[int]]:
    """Each prompt's greedy continuation up to (not including) its first `</s>`, at most
    one token longer than the longest answer (enough to tell a longer answer apart)."""
    width = max(1 + len(r["prompt"]) for r in rows)
    ids = [[PAD_ID] * (width - 1 - len(r["prompt"])) + [BOS_ID, *r["prompt"]] for r in rows]
    mask = [[0] * (width - 1 - len(r["prompt"])) + [1] * (1 + len(r["prompt"])) for r in rows]
    out = model.generate(
        input_ids=torch.tensor(ids, device=device),
        attention_mask=torch.tensor(mask, device=device),
        max_new_tokens=max(len(r["answer"]) for r in rows) + 1,
        do_sample=False,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
    )
    answers = []
    for row in out[:, width:].tolist():
        answers.append(row[: row.index(EOS_ID)] if EOS_ID in row else row)
    return answers
