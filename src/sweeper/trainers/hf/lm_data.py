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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class AnswerPredictions:
    """A model's greedy answers to a split's prompts, in the split's order, and the
    answer-token loss summed over the split."""

    answers: tuple[tuple[int, ...], ...]
    """Each prompt's greedy continuation up to (not including) its first `</s>`."""
    scores: tuple[float, ...]
    """Each answer's probability: the product of its generated tokens' probabilities,
    the closing `</s>` included when one was generated (it decides where the answer
    ends)."""
    correct: tuple[int, ...]
    """1 where the answer is exactly the expected one (exact match), else 0."""
    nll: float
    tokens: int

    def metrics(self) -> dict[str, float]:
        """`loss` (nats per answer token), `perplexity` and `exact_match` (%): exact match
        is `metrics.accuracy_percent` of the counted flags (0 on an empty split), as
        every accuracy."""
        loss = self.nll / max(1, self.tokens)
        right, total = sum(self.correct), len(self.correct)
        return {
            "loss": loss,
            "perplexity": math.exp(min(loss, 50.0)),
            "exact_match": accuracy_percent(right, total) if total else 0.0,
        }


def measure(
    model: torch.nn.Module, dataset: AnswerDataset, device: str = "cpu"
) -> dict[str, float]:
    """`loss`, `perplexity` and `exact_match` (%) of `model` on `dataset`, derived from
    its per-example predictions (`predict`)."""
    return predict(model, dataset, device).metrics()


@torch.no_grad()
def predict(
    model: torch.nn.Module, dataset: AnswerDataset, device: str = "cpu"
) -> AnswerPredictions:
    """Every prompt's greedy answer, its probability and exact match, and the loss sums
    of `model` on `dataset`, in batches of `EVAL_BATCH` in the split's order."""
    was_training = model.training
    model.eval()
    nll, tokens = 0.0, 0
    answers: list[tuple[int, ...]] = []
    scores: list[float] = []
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
        for got, probability in greedy(model, rows, device):
            answers.append(tuple(got))
            scores.append(probability)
    model.train(was_training)
    correct = tuple(
        int(list(got) == row["answer"]) for got, row in zip(answers, dataset.rows, strict=True)
    )
    return AnswerPredictions(tuple(answers), tuple(scores), correct, nll, tokens)


def greedy(
    model: torch.nn.Module, rows: Sequence[dict[str, list[int]]], device: str
) -> list[tuple[list[int], float]]:
    """Each prompt's greedy continuation up to (not including) its first `</s>`, at most
    one token longer than the longest answer (enough to tell a longer answer apart),
    with its probability (`AnswerPredictions.scores`, from the logits the decoding
    chose by)."""
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
        output_logits=True,
        return_dict_in_generate=True,
    )
    generated = out.sequences[:, width:]
    steps = generated.shape[1]
    log_probs = torch.stack(out.logits[:steps], dim=1).float().log_softmax(-1)
    chosen = log_probs.gather(-1, generated.unsqueeze(-1)).squeeze(-1).cpu()
    answers = []
    for row, logs in zip(generated.tolist(), chosen.tolist(), strict=True):
        end = row.index(EOS_ID) if EOS_ID in row else len(row)
        kept = min(len(row), end + 1)  # the closing </s> decides the answer too
        answers.append((row[:end], math.exp(sum(logs[:kept]))))
    return answers


def answer_text(ids: Sequence[int], symbols: Sequence[str] | None) -> str:
    """An answer's ids as text: its sentencepiece pieces joined, `▁` read as a space,
    as sentencepiece decodes them (`symbols`: the prepared folder's symbol per id,
    `data.lm_task.read_symbols`); where the folder keeps no symbols, the ids
    space-separated."""
    if symbols is None:
        return " ".join(str(i) for i in ids)
    pieces = [symbols[i] if 0 <= i < len(symbols) else f"<{i}>" for i in ids]
    return "".join(pieces).replace("\u2581", " ").strip()
