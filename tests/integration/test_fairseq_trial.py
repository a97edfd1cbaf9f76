"""A real fairseq trial on tiny generated data, run as the sweep runs it (`run_trainer`).

The data comes from the project's own preparation (`sweeper.data.prepare`) and the
starting weights from `sweeper.models.init_checkpoint`, so this is the fairseq half of
a demo trial at toy size. The best checkpoint is then reloaded with plain fairseq
(`RobertaModel.from_pretrained`) and must reproduce the test accuracy and loss that the
trial's events recorded at the best validation step; the trial's predictions files
(best and last, valid and test) must count to the recorded accuracies exactly.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from sweeper.spec.load import load_spec
from sweeper.spec.schema import SweepSpec
from sweeper.trainers.base import TrialJob, read_param_counts
from sweeper.trainers.events import best_validation
from sweeper.trainers.fairseq.fairseq_checkpoints import BEST, LAST, allow_fairseq_checkpoints
from sweeper.trainers.fairseq.fairseq_trainer import FairseqTrainer
from sweeper.trainers.metrics import accuracy_percent
from sweeper.trainers.runner import TrialResult, run_trainer
from tests.support.predicted import assert_predictions_reproduce

pytestmark = pytest.mark.integration
pytest.importorskip("fairseq")

DEMO = Path(__file__).resolve().parents[2] / "sweeps" / "demo.yaml"
TRAIN, VALID, TEST = 200, 40, 40
BATCH, EPOCHS, LOG_INTERVAL = 8, 2, 5
UPDATES_PER_EPOCH = TRAIN // BATCH


def tiny_spec(root: Path) -> SweepSpec:
    """The demo spec at toy size, everything under `root`."""
    corpus = root / "corpus"
    return load_spec(
        DEMO,
        [
            f"output_dir={root / 'out'}",
            f"data.dir={corpus}",
            f"model.sentencepiece={corpus / 'sentencepiece.bpe.model'}",
            f"model.dictionary={corpus / 'dict.txt'}",
            f"data.generate.train_size={TRAIN}",
            f"data.generate.valid_size={VALID}",
            f"data.generate.test_size={TEST}",
            "data.generate.unlabeled_size=400",
            "data.generate.vocab_size=200",
            "model.arch.layers=1",
            "model.arch.embed_dim=16",
            "model.arch.ffn_dim=32",
            "model.arch.heads=2",
            "model.arch.max_positions=64",
            f"train.epochs={EPOCHS}",
            f"train.batch_size={BATCH}",
            "train.lr=0.002",
        ],
    )


@pytest.fixture(scope="module")
def trial(tmp_path_factory) -> tuple[TrialJob, TrialResult]:
    from sweeper.data import prepare
    from sweeper.models import init_checkpoint

    root = tmp_path_factory.mktemp("fairseq_trial")
    spec = tiny_spec(root)
    prepared = prepare(spec, log=lambda _: None)
    arch = spec.model.arch.model_copy(update={"vocab_size": prepared.vocab_size})
    init = init_checkpoint(arch, prepared.vocab_size, 2, "random", 1, None, root / "init")
    job = TrialJob(
        framework="fairseq",
        seed=1,
        init="random",
        method="full",
        train=spec.train.model_dump(mode="json"),
        lora=None,
        arch=arch.model_dump(mode="json"),
        num_classes=prepared.num_classes,
        num_train=prepared.num_train,
        data=str(prepared.fairseq_dir),
        init_checkpoint=str(init),
        out_dir=str(root / "trial"),
        extra={"log_interval": LOG_INTERVAL},
    )
    return job, run_trainer(FairseqTrainer(), job)


def test_valid_and_test_are_measured_at_every_epoch(trial) -> None:
    _, result = trial
    epochs = {UPDATES_PER_EPOCH * k: float(k) for k in range(1, EPOCHS + 1)}
    for split in ("valid", "test"):
        measured = {e.step: e for e in result.events if e.split == split}
        assert {step: e.epoch for step, e in measured.items()} == epochs
        for event in measured.values():
            assert event.accuracy is not None and 0.0 <= event.accuracy <= 100.0
            assert event.loss is not None and 0.0 < event.loss < 5.0


def test_train_events_every_log_interval(trial) -> None:
    job, result = trial
    train = [e for e in result.events if e.split == "train"]
    assert [e.step for e in train] == list(range(LOG_INTERVAL, job.total_updates + 1, LOG_INTERVAL))
    assert all(e.loss is not None and e.lr is not None and e.accuracy is None for e in train)
    peak = max(e.lr for e in train)  # type: ignore[type-var]
    assert peak <= job.train["lr"] and train[-1].lr == 0.0  # linear decay to 0 at the end


def test_only_best_and_last_checkpoints_are_kept(trial) -> None:
    job, result = trial
    assert sorted(p.name for p in job.checkpoint_dir.iterdir()) == [BEST, LAST]
    assert (result.checkpoints.best, result.checkpoints.last) == (
        job.checkpoint_dir / BEST,
        job.checkpoint_dir / LAST,
    )


def _load(path: Path) -> dict:
    import torch

    allow_fairseq_checkpoints()
    return torch.load(path, map_location="cpu")


def _checkpoint_updates(path: Path) -> int:
    return int(_load(path)["optimizer_history"][-1]["num_updates"])


def test_only_the_last_checkpoint_keeps_training_state(trial) -> None:
    """Best is for evaluation (and MLflow): its Adam moments are dropped at the end."""
    job, _ = trial
    assert "last_optimizer_state" not in _load(job.checkpoint_dir / BEST)
    assert _load(job.checkpoint_dir / LAST)["last_optimizer_state"] is not None


def test_best_checkpoint_is_the_earliest_best_validation_step(trial) -> None:
    job, result = trial
    best, _ = best_validation(result.events)  # ties: the earliest step
    assert _checkpoint_updates(job.checkpoint_dir / BEST) == best.step
    assert _checkpoint_updates(job.checkpoint_dir / LAST) == job.total_updates


def test_plain_fairseq_reproduces_the_recorded_test_accuracy(trial) -> None:
    """`--valid-subset valid,test` evaluated test in eval mode at every validation point;
    the stored best checkpoint, reloaded by fairseq's hub interface, must agree: the
    accuracy exactly (both are `accuracy_percent` of the same counts)."""
    import torch
    from fairseq.models.roberta import RobertaModel

    job, result = trial
    _, recorded = best_validation(result.events)
    assert recorded is not None
    allow_fairseq_checkpoints()
    model = RobertaModel.from_pretrained(
        str(job.checkpoint_dir),
        checkpoint_file=BEST,
        data_name_or_path=job.data,
        bpe=None,  # ids are already binarized; the default (gpt2) would download files
    )
    model.eval()
    model.task.load_dataset("test")
    dataset = model.task.datasets["test"]
    correct, nll = 0, 0.0
    with torch.no_grad():
        for index in range(len(dataset)):
            item = dataset[index]
            log_probs = model.predict("sentence_classification_head", item["net_input.src_tokens"])
            target = int(item["target"])
            correct += int(log_probs.argmax(-1).item() == target)
            nll -= float(log_probs[0, target])
    assert len(dataset) == TEST
    assert accuracy_percent(correct, TEST) == recorded.accuracy
    # fairseq logs the loss in bits rounded to 0.001; events carry nats
    assert nll / TEST == pytest.approx(recorded.loss, abs=0.001 * math.log(2))


def test_predictions_count_to_the_recorded_accuracies(trial) -> None:
    """Each example's flag is its predicted class against its label, in the prepared
    split's order (the HF folder's labels are the same examples' labels)."""
    import json

    job, result = trial
    files = assert_predictions_reproduce(Path(job.out_dir), result.events)
    hf = Path(job.data).parent / "hf"
    for split, made in files.items():
        labels = [json.loads(line)["label"] for line in (hf / f"{split}.jsonl").open()]
        assert len(made.ids) == len(labels) == {"valid": VALID, "test": TEST}[split]
        for which in ("best", "last"):
            at = made.at(which)
            assert at.correct == tuple(
                int(p == t) for p, t in zip(at.predicted, labels, strict=True)
            )


def test_trainable_params_are_the_classifiers(trial) -> None:
    """Every parameter the classifier uses (encoder + head, the tied LM-head weight
    once); the unused LM head's own dense/norm/bias are not counted."""
    from fairseq.models.roberta import RobertaModel

    job, result = trial
    allow_fairseq_checkpoints()
    model = RobertaModel.from_pretrained(
        str(job.checkpoint_dir), checkpoint_file=LAST, data_name_or_path=job.data, bpe=None
    )
    named = model.model.named_parameters()
    expected = sum(p.numel() for name, p in named if not name.startswith("encoder.lm_head"))
    assert result.trainable_params == (expected, expected)
    # counted by the child, which has torch loaded, not by the parent after it
    assert read_param_counts(Path(job.out_dir)) == (expected, expected)


def test_ties_keep_the_earliest_best(monkeypatch) -> None:
    """fairseq saves checkpoint_best on `score >= best`; the launcher's wrapper passes
    no score for a tie or a worse score, so best stays at the earliest best step."""
    from fairseq import checkpoint_utils

    from sweeper.trainers.fairseq.fairseq_main import keep_earliest_best

    given: list[float | None] = []

    def fairseq_save_checkpoint(cfg, trainer, epoch_itr, val_loss) -> None:
        given.append(val_loss)  # the original keeps its best on the module-level function
        current = checkpoint_utils.save_checkpoint
        if val_loss is not None:
            current.best = max(val_loss, getattr(current, "best", val_loss))

    monkeypatch.setattr(checkpoint_utils, "save_checkpoint", fairseq_save_checkpoint)
    keep_earliest_best()
    cfg = SimpleNamespace(maximize_best_checkpoint_metric=True)
    for score in (50.0, 57.5, 57.5, 55.0, 60.0):
        checkpoint_utils.save_checkpoint(cfg, None, None, score)
    assert given == [50.0, 57.5, None, None, 60.0]


def test_sentence_prediction_logs_counts_and_exact_accuracy(monkeypatch) -> None:
    """Two validation batches of one subset, 100 of 120 and 54 of 67 right: the subset's
    counts are summed, its accuracy is `accuracy_percent(154, 187)` unrounded (fairseq's
    own criterion gives 82.4), and that is the value the best-checkpoint metric reads."""
    import torch
    from fairseq.criterions.sentence_prediction import SentencePredictionCriterion
    from fairseq.logging import metrics

    from sweeper.trainers.fairseq.fairseq_main import exact_accuracy

    def batch(correct: int, total: int) -> dict:
        return {"loss": 0.5 * total, "ntokens": 10 * total, "nsentences": total,
                "sample_size": total, "ncorrect": torch.tensor(correct)}  # fmt: skip

    own = SentencePredictionCriterion.__dict__["reduce_metrics"]
    with metrics.aggregate(new_root=True) as agg:
        own.__func__([batch(100, 120)])
        own.__func__([batch(54, 67)])
    assert agg.get_smoothed_values()["accuracy"] == 82.4

    monkeypatch.setattr(SentencePredictionCriterion, "reduce_metrics", own)
    monkeypatch.setattr(SentencePredictionCriterion, "forward", SentencePredictionCriterion.forward)
    exact_accuracy()
    with metrics.aggregate(new_root=True) as agg:
        SentencePredictionCriterion.reduce_metrics([batch(100, 120)])
        SentencePredictionCriterion.reduce_metrics([batch(54, 67)])
    values = agg.get_smoothed_values()
    assert (values["correct"], values["total"]) == (154, 187)
    assert values["accuracy"] == accuracy_percent(154, 187) == 100.0 * 154 / 187
    assert values["loss"] == pytest.approx(0.5 / math.log(2), abs=1e-3)  # the rest as before
    regression = {k: v for k, v in batch(0, 5).items() if k != "ncorrect"}
    with metrics.aggregate(new_root=True) as agg:  # a regression head counts nothing
        SentencePredictionCriterion.reduce_metrics([regression])
    assert "accuracy" not in agg.get_smoothed_values()


class _TinyClassifier:
    """What sentence_prediction's `forward` asks of a model: a classification head whose
    output is the logits (here: the one-hot "tokens" times a fixed matrix)."""

    def __init__(self, torch, logits_of_token) -> None:
        head = torch.nn.Linear(logits_of_token.size(0), logits_of_token.size(1), bias=False)
        head.weight.data = logits_of_token.t().clone()
        self.classification_heads = torch.nn.ModuleDict({"sentence_classification_head": head})
        self.training = False
        self.torch = torch

    def __call__(self, src_tokens, features_only, classification_head_name):
        one_hot = self.torch.nn.functional.one_hot(src_tokens[:, 0], 4).float()
        return self.classification_heads[classification_head_name](one_hot), None

    def get_targets(self, sample, net_output):
        return sample["target"]


def test_sentence_prediction_logs_class_counts_and_exact_macro_f1(monkeypatch) -> None:
    """Two validation batches of a 3-class head: per-class TP/FP/FN are summed over the
    subset and `macro_f1` is `macro_f1_percent` of those sums, the value
    `--best-checkpoint-metric macro_f1` reads; training batches count nothing."""
    import torch
    from fairseq.criterions.sentence_prediction import SentencePredictionCriterion
    from fairseq.logging import metrics

    from sweeper.trainers.fairseq.fairseq_main import CLASS_COUNTS, exact_accuracy
    from sweeper.trainers.metrics import ClassCounts, macro_f1_percent

    for name in ("forward", "reduce_metrics"):
        monkeypatch.setattr(
            SentencePredictionCriterion, name, SentencePredictionCriterion.__dict__[name]
        )
    exact_accuracy()
    cfg = SimpleNamespace(
        classification_head_name="sentence_classification_head", regression_target=False,
        report_mcc=False, report_acc_and_f1=False, report_pearson_and_spearman=False,
    )  # fmt: skip
    criterion = SentencePredictionCriterion(cfg, SimpleNamespace(label_dictionary=None))
    # token t is predicted as class PREDICTED[t]; class 2 is never predicted
    predicted = [0, 1, 1, 0]
    model = _TinyClassifier(torch, torch.eye(3)[predicted] * 5)

    def sample(tokens: list[int], targets: list[int]) -> dict:
        src = torch.tensor([[t, 2] for t in tokens])
        return {
            "net_input": {"src_tokens": src},
            "target": torch.tensor(targets),
            "ntokens": 2 * len(tokens),
        }

    batches = [sample([0, 1, 2, 3], [0, 1, 2, 2]), sample([1, 0, 3], [1, 2, 0])]
    outputs = [criterion(model, b)[2] for b in batches]
    expected = ClassCounts.of(
        [predicted[t] for t in [0, 1, 2, 3, 1, 0, 3]], [0, 1, 2, 2, 1, 2, 0], 3
    )
    assert expected.present() == [0, 1, 2] and expected.fp[2] == expected.tp[2] == 0
    assert outputs[0][CLASS_COUNTS].tolist() == [[1, 1, 0], [1, 1, 0], [0, 0, 2]]
    with metrics.aggregate(new_root=True) as agg:
        for output in outputs:
            SentencePredictionCriterion.reduce_metrics([output])
    values = agg.get_smoothed_values()
    counts = ClassCounts.from_rows(
        *([values[f"{k}_c{c}"] for c in range(3)] for k in ("tp", "fp", "fn"))
    )
    assert counts == expected
    assert values["macro_f1"] == macro_f1_percent(expected)
    assert values["accuracy"] == accuracy_percent(expected.correct(), 7)
    model.training = True
    assert CLASS_COUNTS not in criterion(model, batches[0])[2]


def test_integers_are_logged_whole(monkeypatch) -> None:
    from fairseq.logging import progress_bar

    from sweeper.trainers.fairseq.fairseq_main import whole_integers_in_logs

    assert progress_bar.format_stat(1234567) == "1.23457e+06"  # fairseq's `{:g}`
    monkeypatch.setattr(progress_bar, "format_stat", progress_bar.format_stat)
    whole_integers_in_logs()
    assert progress_bar.format_stat(1234567) == "1234567"
    assert progress_bar.format_stat(82.35294117647059) == "82.3529"  # floats as before
    assert progress_bar.format_stat(True) == "1"
