"""Test metrics of a stored best checkpoint, measured again outside its trainer.

`sweeper summarize --evaluate` uses this to check the record: the accuracy (or
macro-F1) a trial logged at its best validation step must be what its stored checkpoint
gives on the test split. Each framework reloads the checkpoint the way a user would
(fairseq's hub interface, transformers' / PEFT's `from_pretrained`), so a checkpoint
that only sweeper could read would show up as a mismatch. Predictions are counted per
class (`metrics.ClassCounts`) and turned into percentages by `metrics.accuracy_percent`
and `metrics.classification_metrics`, the functions the trainers recorded them with,
so a faithful record is re-measured exactly.

Imports torch, fairseq and transformers inside the functions: only --evaluate loads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.trainers.base import EVAL_BATCH_SIZE, TrialJob
from sweeper.trainers.metrics import ClassCounts, accuracy_percent, classification_metrics

if TYPE_CHECKING:
    import torch


def test_classification_metrics(counts: ClassCounts) -> dict[str, float]:
    """`test_accuracy`, `test_macro_f1` and the per-class values of test-split counts,
    by logged name."""
    measured = {"accuracy": accuracy_percent(counts.correct(), counts.total())}
    measured.update(classification_metrics(counts))
    return {f"test_{name}": value for name, value in measured.items()}


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _dtype(job: TrialJob) -> torch.dtype | None:
    """The trial's reduced precision (`train.precision`), None for fp32: the record was
    measured in it, so it is measured again in it."""
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(job.train.get("precision", ""))


def fairseq_test_accuracy(job: TrialJob, checkpoint: Path) -> float:
    """Test accuracy of `checkpoint` as `fairseq_test_counts` classifies it."""
    counts = fairseq_test_counts(job, checkpoint)
    return accuracy_percent(counts.correct(), counts.total())


def fairseq_test_counts(job: TrialJob, checkpoint: Path) -> ClassCounts:
    """Reload `checkpoint` (a folder holding checkpoint_best.pt) with fairseq's hub
    interface on the trial's prepared fairseq data, classify the test split and count
    per class (the head's classes at least)."""
    import torch
    from fairseq.models.roberta import RobertaModel

    from sweeper.trainers.fairseq.fairseq_checkpoints import BEST, allow_fairseq_checkpoints

    allow_fairseq_checkpoints()
    hub = RobertaModel.from_pretrained(
        str(checkpoint),
        checkpoint_file=BEST,
        data_name_or_path=job.data,
        bpe=None,  # ids are binarized already; the default gpt2 BPE would download files
    )
    hub.eval().to(_device())
    if _dtype(job) is not None:
        hub.to(_dtype(job))  # fairseq's --bf16/--fp16 run the whole model in that type
    hub.task.load_dataset("test")
    dataset = hub.task.datasets["test"]
    predictions: list[int] = []
    labels: list[int] = []
    with torch.no_grad():
        for start in range(0, len(dataset), EVAL_BATCH_SIZE):
            items = [dataset[i] for i in range(start, min(start + EVAL_BATCH_SIZE, len(dataset)))]
            batch = dataset.collater(items)  # right-padded, as in training
            tokens = batch["net_input"]["src_tokens"].to(_device())
            predicted = hub.predict("sentence_classification_head", tokens).argmax(-1)
            predictions += predicted.cpu().tolist()
            labels += batch["target"].view(-1).tolist()
    if not labels:
        raise ValueError(f"accuracy of 0 examples: the test split of {job.data} is empty")
    return ClassCounts.of(predictions, labels, job.num_classes)


def hf_test_accuracy(job: TrialJob, checkpoint: Path) -> float:
    """Test accuracy of `checkpoint` as `hf_test_counts` classifies it."""
    counts = hf_test_counts(job, checkpoint)
    return accuracy_percent(counts.correct(), counts.total())


def hf_test_counts(job: TrialJob, checkpoint: Path) -> ClassCounts:
    """Reload `checkpoint` with transformers (full fine-tuning) or as PEFT adapters on
    the trial's init weights (LoRA), classify the prepared HF test split and count per
    class."""
    import contextlib

    import torch

    from sweeper.trainers.hf.hf_data import read_split

    model = _hf_model(job, checkpoint).to(_device()).eval()
    dtype = _dtype(job)  # transformers' bf16/fp16: fp32 weights under autocast
    with torch.autocast(_device(), dtype=dtype) if dtype else contextlib.nullcontext():
        return _classify(model, read_split(Path(job.data) / "test.jsonl"), job.num_classes)


def _hf_model(job: TrialJob, checkpoint: Path) -> torch.nn.Module:
    if job.method == "lora":
        from peft import PeftModel

        from sweeper.models import hf_init_model

        return PeftModel.from_pretrained(hf_init_model(Path(job.init_checkpoint)), checkpoint)
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging

    logging.disable_progress_bar()  # a bar per weight load would bury the per-trial lines
    return AutoModelForSequenceClassification.from_pretrained(checkpoint)


def _classify(model: torch.nn.Module, data, num_classes: int) -> ClassCounts:
    import torch

    from sweeper.trainers.hf.hf_data import PadCollator

    collate = PadCollator()
    predictions: list[int] = []
    labels: list[int] = []
    with torch.no_grad():
        for start in range(0, len(data), EVAL_BATCH_SIZE):
            batch = collate(
                [data[i] for i in range(start, min(start + EVAL_BATCH_SIZE, len(data)))]
            )
            logits = model(
                input_ids=batch["input_ids"].to(_device()),
                attention_mask=batch["attention_mask"].to(_device()),
            ).logits
            predictions += logits.argmax(-1).cpu().tolist()
            labels += batch["labels"].tolist()
    if not labels:
        raise ValueError("accuracy of 0 examples: the test split is empty")
    return ClassCounts.of(predictions, labels, num_classes)


def lm_test_metrics(job: TrialJob, checkpoint: Path) -> dict[str, float]:
    """Reload a causal-LM best checkpoint with transformers (full fine-tuning) or as
    PEFT adapters on the trial's starting decoder (LoRA), and measure the test split
    with the function the trial measured it with (`trainers.lm_data.measure`)."""
    from sweeper.models.llama import load_lm
    from sweeper.trainers.hf.lm_data import AnswerDataset, measure

    if job.method == "lora":
        from peft import PeftModel

        model = PeftModel.from_pretrained(load_lm(Path(job.init_checkpoint)), checkpoint)
    else:
        model = load_lm(checkpoint)
    test = AnswerDataset.read(Path(job.data) / "test.jsonl")
    measured = measure(model.to(_device()), test, _device())
    return {f"test_{name}": value for name, value in measured.items()}
