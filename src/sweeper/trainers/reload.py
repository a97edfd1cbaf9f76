"""Per-example predictions of a stored checkpoint, made outside its trainer.

Two callers need them. A trial's own child process, once training has finished,
predicts valid and test with its best and last checkpoints (the predictions files,
`sweeper.trainers.trial_predictions`); `sweeper summarize --evaluate` predicts the test
split again with a stored best checkpoint and checks the record against it: the
metric the trial logged at its best validation step, and the stored predictions
example by example. Each framework reloads the checkpoint the way a user would
(fairseq's hub interface, transformers' / PEFT's `from_pretrained`), so a checkpoint
that only sweeper could read would show up as a mismatch.

Per-example predictions are the one primitive: a split's counts and metrics are
derived from them (`Measured`), classes counted per class (`metrics.ClassCounts`) and
turned into percentages by `metrics.accuracy_percent` and
`metrics.classification_metrics`, the functions the trainers recorded them with, so
a faithful record is re-measured exactly, and a causal LM's exact match counted from
the per-example flags of `trainers.hf.lm_data.predict`, the function its trial
measured with. Examples are predicted in the split's order in batches of
`EVAL_BATCH_SIZE` (a causal LM's: `lm_data.EVAL_BATCH`), as the trainers evaluate.

Imports torch, fairseq and transformers inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.trainers.base import EVAL_BATCH_SIZE, TrialJob
from sweeper.trainers.metrics import ClassCounts, accuracy_percent, classification_metrics
from sweeper.trainers.predictions import CheckpointPredictions, Measured

if TYPE_CHECKING:
    import torch

TEST = ("test",)


def classified(
    step: int,
    predicted: Sequence[int],
    scores: Sequence[float],
    labels: Sequence[int],
    num_classes: int,
) -> Measured:
    """A classifier's predictions on a split with its labels: correct where the class is
    the label; accuracy, macro-F1 and per-class values from the counts of both."""
    if not labels:
        raise ValueError("accuracy of 0 examples: the split is empty")
    counts = ClassCounts.of(predicted, labels, num_classes)
    correct = tuple(int(int(p) == int(t)) for p, t in zip(predicted, labels, strict=True))
    found = CheckpointPredictions(
        step, tuple(int(p) for p in predicted), tuple(float(s) for s in scores), correct
    )
    metrics = {"accuracy": accuracy_percent(counts.correct(), counts.total())}
    return Measured(found, {**metrics, **classification_metrics(counts)})


def device_of(job: TrialJob | None = None) -> str:
    """Where to predict: for a trial's child (`job` given) the device it trained on,
    CUDA where the job names it and one is visible, else the CPU; for `--evaluate`
    (None) CUDA if one is visible, else the CPU."""
    import torch

    if job is not None and not job.device.startswith("cuda"):
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def _dtype(job: TrialJob) -> torch.dtype | None:
    """The trial's reduced precision (`train.precision`), None for fp32: the record was
    measured in it, so it is measured again in it."""
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(job.train.get("precision", ""))


def fairseq_predict(
    job: TrialJob,
    folder: Path,
    step: int,
    splits: Sequence[str] = TEST,
    checkpoint_file: str | None = None,
    device: str | None = None,
) -> dict[str, Measured]:
    """Reload `folder`'s checkpoint (checkpoint_best.pt unless `checkpoint_file`) with
    fairseq's hub interface on the trial's prepared fairseq data and classify each of
    `splits`: per example the head's class (the argmax of its log-probabilities) and
    that class's probability."""
    import torch
    from fairseq.models.roberta import RobertaModel

    from sweeper.trainers.fairseq.fairseq_checkpoints import BEST, allow_fairseq_checkpoints

    allow_fairseq_checkpoints()
    hub = RobertaModel.from_pretrained(
        str(folder),
        checkpoint_file=checkpoint_file or BEST,
        data_name_or_path=job.data,
        bpe=None,  # ids are binarized already; the default gpt2 BPE would download files
    )
    device = device or device_of()
    hub.eval().to(device)
    if _dtype(job) is not None:
        hub.to(_dtype(job))  # fairseq's --bf16/--fp16 run the whole model in that type
    found = {}
    for split in splits:
        hub.task.load_dataset(split)
        dataset = hub.task.datasets[split]
        predicted: list[int] = []
        scores: list[float] = []
        labels: list[int] = []
        with torch.no_grad():
            for start in range(0, len(dataset), EVAL_BATCH_SIZE):
                end = min(start + EVAL_BATCH_SIZE, len(dataset))
                batch = dataset.collater([dataset[i] for i in range(start, end)])  # right-padded
                tokens = batch["net_input"]["src_tokens"].to(device)
                log_probs = hub.predict("sentence_classification_head", tokens)
                classes = log_probs.argmax(-1)
                chosen = log_probs.float().gather(-1, classes.unsqueeze(-1)).squeeze(-1)
                predicted += classes.cpu().tolist()
                scores += chosen.exp().cpu().tolist()
                labels += batch["target"].view(-1).tolist()
        if not labels:
            raise ValueError(f"accuracy of 0 examples: the {split} split of {job.data} is empty")
        found[split] = classified(step, predicted, scores, labels, job.num_classes)
    return found


def hf_predict(
    job: TrialJob,
    checkpoint: Path,
    step: int,
    splits: Sequence[str] = TEST,
    device: str | None = None,
) -> dict[str, Measured]:
    """Reload `checkpoint` with transformers (full fine-tuning) or as PEFT adapters on
    the trial's init weights (LoRA) and classify each prepared HF split of `splits`."""
    import contextlib

    import torch

    from sweeper.trainers.hf.hf_data import read_split

    device = device or device_of()
    model = _hf_model(job, checkpoint).to(device).eval()
    dtype = _dtype(job)  # transformers' bf16/fp16: fp32 weights under autocast
    found = {}
    for split in splits:
        data = read_split(Path(job.data) / f"{split}.jsonl")
        with torch.autocast(device, dtype=dtype) if dtype else contextlib.nullcontext():
            found[split] = _classify(model, data, job.num_classes, step, device)
    return found


def _hf_model(job: TrialJob, checkpoint: Path) -> torch.nn.Module:
    if job.method == "lora":
        from peft import PeftModel

        from sweeper.models import hf_init_model

        return PeftModel.from_pretrained(hf_init_model(Path(job.init_checkpoint)), checkpoint)
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging

    logging.disable_progress_bar()  # a bar per weight load would bury the per-trial lines
    return AutoModelForSequenceClassification.from_pretrained(checkpoint)


def _classify(model: torch.nn.Module, data, num_classes: int, step: int, device: str) -> Measured:
    import torch

    from sweeper.trainers.hf.hf_data import PadCollator

    collate = PadCollator()
    predicted: list[int] = []
    scores: list[float] = []
    labels: list[int] = []
    with torch.no_grad():
        for start in range(0, len(data), EVAL_BATCH_SIZE):
            batch = collate(
                [data[i] for i in range(start, min(start + EVAL_BATCH_SIZE, len(data)))]
            )
            logits = model(
                input_ids=batch["input_ids"].to(device),
                attention_mask=batch["attention_mask"].to(device),
            ).logits
            classes = logits.argmax(-1)  # as the trainer's `argmax_logits`, in the logits' type
            chosen = logits.float().softmax(-1).gather(-1, classes.unsqueeze(-1)).squeeze(-1)
            predicted += classes.cpu().tolist()
            scores += chosen.cpu().tolist()
            labels += batch["labels"].tolist()
    return classified(step, predicted, scores, labels, num_classes)


def lm_predict(
    job: TrialJob,
    checkpoint: Path,
    step: int,
    splits: Sequence[str] = TEST,
    device: str | None = None,
) -> dict[str, Measured]:
    """Reload a causal-LM checkpoint with transformers (full fine-tuning) or as PEFT
    adapters on the trial's starting decoder (LoRA), and measure each split of `splits`
    with the function the trial measured it with (`lm_data.predict`): per example the
    greedy answer as text, the product of its tokens' probabilities and its exact
    match; loss and perplexity beside them."""
    from sweeper.data.lm_task import read_symbols
    from sweeper.models.llama import load_lm
    from sweeper.trainers.hf.lm_data import AnswerDataset, answer_text, predict

    if job.method == "lora":
        from peft import PeftModel

        model = PeftModel.from_pretrained(load_lm(Path(job.init_checkpoint)), checkpoint)
    else:
        model = load_lm(checkpoint)
    device = device or device_of()
    model = model.to(device)
    symbols = read_symbols(Path(job.data))
    found = {}
    for split in splits:
        answers = predict(model, AnswerDataset.read(Path(job.data) / f"{split}.jsonl"), device)
        texts = tuple(answer_text(ids, symbols) for ids in answers.answers)
        found[split] = Measured(
            CheckpointPredictions(step, texts, tuple(answers.scores), tuple(answers.correct)),
            answers.metrics(),
        )
    return found
