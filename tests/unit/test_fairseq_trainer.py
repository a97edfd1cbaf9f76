"""The fairseq trainer's parent side: the command line it builds from the lab's recipe,
and the metric events it reads off fairseq's real log lines (the format of fairseq
0.12.3 run by this trainer's child, counts included; no fairseq import needed)."""

from __future__ import annotations

import dataclasses
import math
import sys
import zipfile
from fractions import Fraction
from pathlib import Path

import pytest

from sweeper.spec.model_block import ArchConfig
from sweeper.spec.train_block import TrainConfig
from sweeper.trainers.base import TrialJob, write_param_counts
from sweeper.trainers.fairseq.fairseq_checkpoints import BEST, LAST
from sweeper.trainers.fairseq.fairseq_main import _save_dir, repair_last_checkpoint
from sweeper.trainers.fairseq.fairseq_trainer import FairseqTrainer, counts_from, parse_log_line
from sweeper.trainers.metrics import ClassCounts, accuracy_percent, macro_f1_percent
from sweeper.trainers.registry import get_trainer

LN2 = math.log(2)

TRAIN_INNER = (
    '2026-11-22 04:29:46 | INFO | train_inner | {"epoch": 1, "update": 0.111, "loss": "1.008", '
    '"nll_loss": "0.066", "correct": "106", "total": "200", "accuracy": "53", "wps": "3121.8", '
    '"ups": "25.38", "wpb": "123.1", "bsz": "8", "num_updates": "25", "lr": "3.67647e-05", '
    '"gnorm": "2.279", "train_wall": "1", "wall": "5"}\n'
)
VALID = (
    '2026-11-22 04:29:54 | INFO | valid | {"epoch": 1, "valid_loss": "0.999", "valid_nll_loss": '
    '"0.065", "valid_correct": "101", "valid_total": "200", "valid_accuracy": "50.5", '
    '"valid_wps": "11410.6", "valid_wpb": "123.2", "valid_bsz": "8", "valid_num_updates": "225"}\n'
)
VALID_WITH_BEST = (
    '2026-11-22 04:30:04 | INFO | valid | {"epoch": 2, "valid_loss": "0.963", "valid_nll_loss": '
    '"0.063", "valid_correct": "115", "valid_total": "200", "valid_accuracy": "57.5", '
    '"valid_wps": "10049.8", "valid_wpb": "123.2", "valid_bsz": "8", "valid_num_updates": "450", '
    '"valid_best_accuracy": "57.5"}\n'
)
TEST = (
    '2026-11-22 04:29:55 | INFO | test | {"epoch": 1, "test_loss": "1", "test_nll_loss": "0.065", '
    '"test_correct": "98", "test_total": "200", "test_accuracy": "49", "test_wps": "8277.7", '
    '"test_wpb": "122.1", "test_bsz": "8", "test_num_updates": "225"}\n'
)
VALID_187 = (
    '2026-11-26 09:07:20 | INFO | valid | {"epoch": 1, "valid_loss": "0.663", "valid_nll_loss": '
    '"0.03", "valid_correct": "154", "valid_total": "187", "valid_accuracy": "82.3529", '
    '"valid_wps": "0", "valid_wpb": "2100.3", "valid_bsz": "62.3", "valid_num_updates": "10"}\n'
)
"""154 of 187 right: fairseq's own criterion would have logged "82.4" (round=1)."""
VALID_3_CLASSES = (
    '2026-11-26 12:24:37 | INFO | valid | {"epoch": 1, "valid_loss": "1.561", "valid_nll_loss": '
    '"0.044", "valid_correct": "9", "valid_total": "20", "valid_tp_c0": "0", "valid_tp_c1": "9", '
    '"valid_tp_c2": "0", "valid_fp_c0": "0", "valid_fp_c1": "11", "valid_fp_c2": "0", '
    '"valid_fn_c0": "5", "valid_fn_c1": "0", "valid_fn_c2": "6", "valid_accuracy": "45", '
    '"valid_macro_f1": "20.6897", "valid_wps": "0", "valid_wpb": "711", "valid_bsz": "20", '
    '"valid_num_updates": "10"}\n'
)
"""A 3-class trial's validation line as the child wrote it: the head predicts class 1
only (F1 18/29), classes 0 and 2 occur but are never predicted (F1 0)."""
EPOCH_AVERAGE = (
    '2026-11-22 04:29:55 | INFO | train | {"epoch": 1, "train_loss": "1.003", "train_nll_loss": '
    '"0.065", "train_correct": "904", "train_total": "1800", "train_accuracy": "50.2", '
    '"train_wps": "2870.6", "train_ups": "23.1", "train_wpb": "124.3", "train_bsz": "8", '
    '"train_num_updates": "225", "train_lr": "8.51466e-05", "train_gnorm": "2.528", '
    '"train_train_wall": "8", "train_wall": "14"}\n'
)
MASKED_LM_VALID = (
    '2026-11-22 04:43:22 | INFO | valid | {"epoch": 1, "valid_loss": "8.397", "valid_ppl": '
    '"337.05", "valid_wps": "55472.3", "valid_wpb": "2582.7", "valid_bsz": "46", '
    '"valid_num_updates": "60"}\n'
)
PYTHON_DEFAULT_FORMAT = (
    'INFO:valid:{"epoch": 1, "valid_loss": "0.999", "valid_nll_loss": "0.065", '
    '"valid_correct": "101", "valid_total": "200", "valid_accuracy": "50.5", '
    '"valid_wps": "17972.9", "valid_wpb": "123.2", "valid_bsz": "8", "valid_num_updates": "225"}\n'
)
PLAIN_LINES = [
    "2026-11-22 04:29:45 | INFO | fairseq.trainer | Loaded checkpoint /x/init.pt "
    "(epoch 1 @ 0 updates)\n",
    '2026-11-22 04:29:54 | INFO | fairseq_cli.train | begin validation on "valid" subset\n',
    "  with torch.cuda.amp.autocast(enabled=(isinstance(optimizer, AMPOptimizer))):\n",
    "2026-11-22 04:29:54 | INFO | valid | {not json\n",
    "\n",
]


def make_job(tmp_path: Path, **changes) -> TrialJob:
    """The lab's trial: 1,800 sentences, batch 8, 5 epochs, recipe defaults."""
    train = TrainConfig().model_dump(mode="json")
    train.update(changes.pop("train", {}))
    arch = ArchConfig(layers=2, embed_dim=64, ffn_dim=128, heads=4, max_positions=64)
    job = TrialJob(
        framework="fairseq",
        seed=1,
        init="pretrained",
        method="full",
        train=train,
        lora=None,
        arch=arch.model_copy(update={"vocab_size": 1002}).model_dump(mode="json"),
        num_classes=2,
        num_train=1800,
        data="/data/fairseq",
        init_checkpoint="/init/init-pretrained-s1.pt",
        out_dir=str(tmp_path / "trial"),
    )
    return dataclasses.replace(job, **changes)


def flag(args: list[str], name: str) -> str:
    """The value after `name` (which must occur exactly once)."""
    assert args.count(name) == 1, f"{name} occurs {args.count(name)} times in {args}"
    return args[args.index(name) + 1]


def test_registry_finds_the_fairseq_trainer() -> None:
    assert isinstance(get_trainer("fairseq"), FairseqTrainer)


def test_command_is_fairseq_train_through_the_launcher(tmp_path: Path) -> None:
    command = FairseqTrainer().command(make_job(tmp_path))
    assert command[:3] == [sys.executable, "-m", "sweeper.trainers.fairseq.fairseq_main"]
    assert command[3] == "/data/fairseq"  # fairseq-train's positional DATA
    assert flag(command, "--task") == "sentence_prediction"
    assert flag(command, "--criterion") == "sentence_prediction"


def test_lab_recipe_flags(tmp_path: Path) -> None:
    job = make_job(tmp_path)
    args = FairseqTrainer().command(job)
    assert job.total_updates == 1125
    expected = {
        "--lr": "1e-05",
        "--warmup-updates": "68",  # 0.06 × 1,125 = 67.5, rounded half up
        "--total-num-update": "1125",
        "--max-update": "1125",
        "--max-epoch": "5",
        "--batch-size": "8",
        "--batch-size-valid": "64",
        "--required-batch-size-multiple": "1",
        "--optimizer": "adam",
        "--adam-betas": "(0.9, 0.98)",
        "--adam-eps": "1e-06",
        "--weight-decay": "0.1",
        "--dropout": "0.1",
        "--attention-dropout": "0.1",
        "--clip-norm": "0.0",
        "--lr-scheduler": "polynomial_decay",
        "--num-classes": "2",
        "--init-token": "0",
        "--separator-token": "2",
        "--seed": "1",
        "--valid-subset": "valid,test",
        "--best-checkpoint-metric": "accuracy",
        "--save-dir": str(Path(job.out_dir) / "checkpoints"),
        "--finetune-from-model": "/init/init-pretrained-s1.pt",
        "--log-format": "json",
        "--log-interval": "25",
        "--num-workers": "0",
    }
    assert {name: flag(args, name) for name in expected} == expected
    for switch in ("--maximize-best-checkpoint-metric", "--no-epoch-checkpoints", "--cpu"):
        assert switch in args
    for forbidden in ("--disable-validation", "--no-last-checkpoints", "--reset-optimizer"):
        assert forbidden not in args


def test_architecture_flags(tmp_path: Path) -> None:
    args = FairseqTrainer().command(make_job(tmp_path))
    assert flag(args, "--arch") == "roberta_base"
    assert flag(args, "--encoder-layers") == "2"
    assert flag(args, "--encoder-embed-dim") == "64"
    assert flag(args, "--encoder-ffn-embed-dim") == "128"
    assert flag(args, "--encoder-attention-heads") == "4"
    assert flag(args, "--max-positions") == "64"
    assert flag(args, "--activation-fn") == "gelu"


@pytest.mark.parametrize(
    ("num_train", "ratio", "total", "warmup"),
    [(1800, 0.06, 1125, 68), (600, 0.06, 375, 23), (601, 0.06, 380, 23), (1800, 0.0, 1125, 0)],
)
def test_total_and_warmup_updates(tmp_path, num_train, ratio, total, warmup) -> None:
    """Updates per epoch round up (a last partial batch is an update); warmup rounds half
    up, the same integer the HF trainer uses."""
    job = make_job(tmp_path, num_train=num_train, train={"warmup_ratio": ratio})
    args = FairseqTrainer().command(job)
    assert flag(args, "--total-num-update") == flag(args, "--max-update") == str(total)
    assert flag(args, "--warmup-updates") == str(warmup)


def test_linear_schedule_is_polynomial_decay(tmp_path: Path) -> None:
    trainer = FairseqTrainer()
    linear = trainer.command(make_job(tmp_path, train={"lr_scheduler": "linear"}))
    polynomial = trainer.command(make_job(tmp_path, train={"lr_scheduler": "polynomial"}))
    assert linear == polynomial


def test_cuda_job_trains_on_the_gpu(tmp_path: Path) -> None:
    args = FairseqTrainer().command(make_job(tmp_path, device="cuda"))
    assert "--cpu" not in args
    assert flag(args, "--distributed-world-size") == "1"


@pytest.mark.parametrize(
    ("precision", "device", "flags"),
    [
        ("fp32", "cpu", {"--cpu"}),
        ("bf16", "cpu", {"--cpu", "--bf16"}),
        ("bf16", "cuda", {"--bf16"}),
        ("fp16", "cuda", {"--fp16"}),
    ],
)
def test_precision_is_fairseqs_own_switch(tmp_path: Path, precision, device, flags) -> None:
    job = make_job(tmp_path, device=device, train={"precision": precision})
    args = set(FairseqTrainer().command(job))
    assert flags <= args
    assert not ({"--cpu", "--bf16", "--fp16", "--tpu"} - flags) & args


def test_bf16_does_not_turn_on_fairseqs_tpu_mode() -> None:
    """fairseq's argument post-processing sets tpu with bf16 (fix 7 undoes it)."""
    pytest.importorskip("fairseq")
    from fairseq import options

    from sweeper.trainers.fairseq.fairseq_main import bf16_without_tpu

    original = options.parse_args_and_arch
    argv = ["data", "--task", "sentence_prediction", "--arch", "roberta_base", "--bf16", "--cpu"]
    try:
        assert options.parse_args_and_arch(options.get_training_parser(), argv).tpu
        bf16_without_tpu(argv)
        parsed = options.parse_args_and_arch(options.get_training_parser(), argv)
        assert parsed.bf16 and not parsed.tpu
    finally:
        options.parse_args_and_arch = original


def test_log_interval_follows_job_extra(tmp_path: Path) -> None:
    args = FairseqTrainer().command(make_job(tmp_path, extra={"log_interval": 5}))
    assert flag(args, "--log-interval") == "5"


def test_lora_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="full fine-tuning only"):
        FairseqTrainer().command(make_job(tmp_path, method="lora"))


def test_train_inner_line_is_a_train_event_in_nats() -> None:
    (event,) = FairseqTrainer().parse_line(TRAIN_INNER, 3.5)
    assert (event.split, event.step, event.epoch) == ("train", 25, 0.111)
    assert event.loss == pytest.approx(1.008 * LN2)
    assert event.lr == pytest.approx(3.67647e-05)
    assert event.accuracy is None
    assert event.wall_time == 3.5


def test_valid_and_test_lines_are_eval_events() -> None:
    trainer = FairseqTrainer()
    (valid,) = trainer.parse_line(VALID, 9.0)
    (test,) = trainer.parse_line(TEST, 9.5)
    assert (valid.split, valid.step, valid.epoch, valid.accuracy) == ("valid", 225, 1.0, 50.5)
    assert valid.loss == pytest.approx(0.999 * LN2)
    assert (test.split, test.step, test.epoch, test.accuracy) == ("test", 225, 1.0, 49.0)
    assert test.loss == pytest.approx(LN2)
    assert valid.lr is None and test.lr is None
    (later,) = trainer.parse_line(VALID_WITH_BEST, 20.0)
    assert (later.step, later.accuracy) == (450, 57.5)


def test_python_default_log_format_is_understood() -> None:
    (event,) = FairseqTrainer().parse_line(PYTHON_DEFAULT_FORMAT, 1.0)
    assert (event.split, event.step, event.accuracy) == ("valid", 225, 50.5)


def test_accuracy_is_computed_from_the_counts_exactly() -> None:
    """The recorded accuracy is `accuracy_percent` of the line's counts, bit for bit,
    whatever fairseq's shortened display value says."""
    (event,) = parse_log_line(VALID_187, 1.0)
    assert event.accuracy == 100.0 * 154 / 187 == accuracy_percent(154, 187)
    assert event.accuracy != 82.4 and event.accuracy != 82.3529
    shown_as_rounded = VALID_187.replace('"82.3529"', '"82.4"')
    assert parse_log_line(shown_as_rounded, 1.0)[0].accuracy == 100.0 * 154 / 187


def test_macro_f1_and_per_class_values_come_from_the_class_counts() -> None:
    """Macro-F1 is `macro_f1_percent` of the line's TP/FP/FN, bit for bit, never
    fairseq's six-digit display value; per-class values for every class that occurs."""
    (event,) = parse_log_line(VALID_3_CLASSES, 1.0)
    counts = ClassCounts((0, 9, 0), (0, 11, 0), (5, 0, 6))
    assert event.accuracy == accuracy_percent(9, 20)
    assert event.value("macro_f1") == macro_f1_percent(counts) == float(100 * Fraction(18, 29) / 3)
    assert event.value("macro_f1") != 20.6897
    assert event.value("f1_class1") == float(100 * Fraction(18, 29))
    assert (event.value("precision_class1"), event.value("recall_class1")) == (45.0, 100.0)
    assert event.value("f1_class0") == event.value("f1_class2") == 0.0
    assert sorted(event.metrics or {}) == sorted(
        ["macro_f1"] + [f"{k}_class{c}" for k in ("precision", "recall", "f1") for c in range(3)]
    )
    test = VALID_3_CLASSES.replace("| valid |", "| test |").replace('"valid_', '"test_')
    assert parse_log_line(test, 1.0)[0].metrics == event.metrics


def test_a_line_without_class_counts_has_no_macro_f1() -> None:
    """fairseq's own `macro_f1` display value, or a class with a missing count, is
    never read: the counts must all be there."""
    (event,) = parse_log_line(VALID, 1.0)
    assert event.metrics is None
    partial = VALID_3_CLASSES.replace('"valid_fn_c0": "5", ', "")
    assert parse_log_line(partial, 1.0)[0].metrics is None


def test_class_counts_are_read_in_class_order() -> None:
    stats = {"valid_tp_c0": "3", "valid_fp_c0": "1", "valid_fn_c0": "0"}
    stats |= {"valid_tp_c1": "1234567", "valid_fp_c1": "0", "valid_fn_c1": "2"}
    assert counts_from(stats, "valid_") == ClassCounts((3, 1234567), (1, 0), (0, 2))
    assert counts_from({}, "valid_") is None


@pytest.mark.parametrize(
    ("select", "flags", "maximize"),
    [
        (None, ["--best-checkpoint-metric", "accuracy"], True),
        (
            {"metric": "valid_macro_f1", "mode": "max"},
            ["--best-checkpoint-metric", "macro_f1"],
            True,
        ),
        ({"metric": "valid_loss", "mode": "min"}, ["--best-checkpoint-metric", "loss"], False),
    ],
)
def test_best_checkpoint_follows_the_selection(tmp_path: Path, select, flags, maximize) -> None:
    job = make_job(tmp_path, extra={"select": select} if select else {})
    args = FairseqTrainer().command(job)
    assert flag(args, flags[0]) == flags[1]
    assert ("--maximize-best-checkpoint-metric" in args) is maximize


def test_counts_of_a_million_or_more_are_read_whole() -> None:
    """The child writes integers whole (fairseq's `{:g}` would give "1.23457e+06")."""
    line = VALID_187.replace('"154"', '"1234567"').replace('"187"', '"2000003"')
    (event,) = parse_log_line(line, 1.0)
    assert event.accuracy == 100.0 * 1234567 / 2000003


def test_fairseqs_accuracy_without_counts_is_not_recorded() -> None:
    """A line that is not from sweeper's child (no counts) has no accuracy: the rounded
    display value never enters the record."""
    line = VALID.replace('"valid_correct": "101", "valid_total": "200", ', "")
    assert '"valid_accuracy": "50.5"' in line
    (event,) = parse_log_line(line, 1.0)
    assert (event.step, event.accuracy) == (225, None)


def test_masked_lm_validation_has_no_accuracy() -> None:
    (event,) = parse_log_line(MASKED_LM_VALID, 1.0)
    assert (event.split, event.step, event.accuracy) == ("valid", 60, None)
    assert event.loss == pytest.approx(8.397 * LN2)


@pytest.mark.parametrize("line", [EPOCH_AVERAGE, *PLAIN_LINES])
def test_other_lines_give_no_event(line: str) -> None:
    assert FairseqTrainer().parse_line(line, 1.0) == []


def test_nan_loss_reaches_the_runner_as_non_finite() -> None:
    line = TRAIN_INNER.replace('"loss": "1.008"', '"loss": "nan"')
    (event,) = FairseqTrainer().parse_line(line, 1.0)
    assert not event.is_finite()


def test_trainable_params_are_the_ones_the_child_wrote(tmp_path: Path) -> None:
    """The child counts the trained classifier (`fairseq_main.write_counts`); the
    parent reads the file and opens no checkpoint (here: not a checkpoint at all)."""
    job = make_job(tmp_path)
    job.checkpoint_dir.mkdir(parents=True)
    (job.checkpoint_dir / LAST).write_bytes(b"not a checkpoint")
    write_param_counts(Path(job.out_dir), 139_714, 139_714)
    assert FairseqTrainer().trainable_params(job) == (139_714, 139_714)


def test_checkpoints_are_best_and_last(tmp_path: Path) -> None:
    job = make_job(tmp_path)
    trainer = FairseqTrainer()
    assert trainer.checkpoints(job).best is None and trainer.checkpoints(job).last is None
    assert trainer.trainable_params(job) is None
    job.checkpoint_dir.mkdir(parents=True)
    (job.checkpoint_dir / BEST).write_bytes(b"x")
    (job.checkpoint_dir / LAST).write_bytes(b"x")
    found = trainer.checkpoints(job)
    assert (found.best, found.last) == (job.checkpoint_dir / BEST, job.checkpoint_dir / LAST)


def _zip(path: Path, payload: bytes) -> None:
    """A stand-in for a torch checkpoint: torch saves zip archives."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", payload)


def test_torn_last_checkpoint_is_restored_from_best(tmp_path: Path) -> None:
    _zip(tmp_path / BEST, b"state at step 450")
    (tmp_path / LAST).write_bytes((tmp_path / BEST).read_bytes()[:40])  # killed mid-copy
    repair_last_checkpoint(tmp_path)
    assert (tmp_path / LAST).read_bytes() == (tmp_path / BEST).read_bytes()


def test_intact_last_checkpoint_is_left_alone(tmp_path: Path) -> None:
    _zip(tmp_path / BEST, b"state at step 450")
    _zip(tmp_path / LAST, b"state at step 675")
    before = (tmp_path / LAST).read_bytes()
    repair_last_checkpoint(tmp_path)
    assert (tmp_path / LAST).read_bytes() == before
    repair_last_checkpoint(tmp_path / "fresh-trial")  # nothing saved yet: nothing to do


def test_torn_last_without_best_is_an_error(tmp_path: Path) -> None:
    (tmp_path / LAST).write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(RuntimeError, match="damaged"):
        repair_last_checkpoint(tmp_path)


def test_save_dir_is_read_from_either_spelling() -> None:
    assert _save_dir(["data", "--save-dir", "/a/b", "--cpu"]) == Path("/a/b")
    assert _save_dir(["data", "--save-dir=/c"]) == Path("/c")
    assert _save_dir(["data", "--cpu"]) is None
