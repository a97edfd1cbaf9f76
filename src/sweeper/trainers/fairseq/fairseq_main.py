"""fairseq-train as sweeper's trials run it, with the fixes this stack needs.

`python -m sweeper.trainers.fairseq.fairseq_main ARGS` takes exactly fairseq-train's arguments
and applies these fixes around fairseq's own training:

1. torch >= 2.6 loads checkpoints with `weights_only=True`, and fairseq's own
   checkpoints pickle an `argparse.Namespace`: unfixed, fairseq can neither resume from
   checkpoint_last.pt nor be loaded by `RobertaModel.from_pretrained`. The Namespace is
   allowlisted (`allow_fairseq_checkpoints`), nothing broader.
2. fairseq overwrites checkpoint_best.pt on a *tie* (`>=`); sweeper's rule
   (docs/architecture.md, invariant 3, and HF's strict `>`) is that the earliest best
   step wins, so the stored best checkpoint is the one whose test accuracy the
   summariser reports.
3. fairseq writes checkpoint_best.pt atomically and then *copies* it to
   checkpoint_last.pt; a kill during that copy would leave a torn last checkpoint that
   every retry fails on. A torn last is replaced by best, which is the same state.
4. The child dies with its parent (Linux `PR_SET_PDEATHSIG`): a killed Ray worker must
   not leave an orphan training into the checkpoint folder its retry is using.
5. numpy 2 removed `numpy.compat`, which fairseq's `--sample-break-mode eos` (used by
   the pretraining stage) still reads `long` from.
6. The process exits without interpreter teardown after a successful run
   (`sweeper.quick_exit.exit_now`): teardown can abort with SIGABRT after everything
   is saved ("terminate called without an active exception", as a native worker
   thread is destroyed), which would turn a finished trial into a failed one.
7. fairseq's `--bf16` "implies --tpu" (a TPU through torch_xla, absent here): bf16 on
   CPU or CUDA would fail at start. The implication is undone unless `--tpu` was given
   (`bf16_without_tpu`); fairseq's own bf16 code path then runs on the trial's device.
8. fairseq's sentence_prediction criterion logs accuracy as a weighted mean of per-batch
   percentages rounded to one decimal, and picks checkpoint_best.pt on that rounded
   value. It logs the counts instead (`exact_accuracy`): correct predictions and
   examples, summed over the subset, and the accuracy `metrics.accuracy_percent`
   computes from them, unrounded. fairseq's best-checkpoint choice then compares exact
   values, and each valid/test log line carries the counts the parent computes the
   recorded accuracy from (`fairseq.parse_log_line`). Validation and test also log
   per-class TP/FP/FN sums and the macro-F1 `metrics.macro_f1_percent` derives from
   them (`class_counts`), so `--best-checkpoint-metric macro_f1` works alike.
9. fairseq's JSON log writes every number with `{:g}` (six significant digits): an
   integer (a count, `num_updates`) of a million or more would lose digits. Integers
   are written whole (`whole_integers_in_logs`).

10. SIGTERM (a preemption notice) stops training after the update in progress with
   checkpoint_last.pt saved at that update (`fairseq_notice`); the process then exits
   with `preemption.PREEMPTED_EXIT`, printing the step (`preemption.Notice`).
11. fairseq seeds the data order and the dropout masks with one `--seed` (the masks:
   torch reseeded with seed + num_updates before every update). A trial's dropout seed
   is its own (`TrialJob.seed_of("dropout")`, read from the trial.json beside
   --save-dir; `--seed` is the data-order seed): `fairseq_seeds.FairseqSeeds` reseeds
   with it + num_updates, and records the starting weights and each epoch's example
   order in the trial folder's seeds.json.

After training, checkpoint_best.pt loses its optimizer state (`drop_training_state`),
and a trial's best and last checkpoints predict valid and test example by example
(`fairseq_predict.write_predictions`: the trial folder's predictions files).
"""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from pathlib import Path

from sweeper.quick_exit import exit_now
from sweeper.trainers.fairseq.fairseq_checkpoints import BEST, LAST, allow_fairseq_checkpoints
from sweeper.trainers.fairseq.fairseq_notice import FairseqNotice
from sweeper.trainers.fairseq.fairseq_predict import write_predictions
from sweeper.trainers.fairseq.fairseq_seeds import FairseqSeeds
from sweeper.trainers.notice import Notice


def keep_earliest_best() -> None:
    """Make checkpoint_best.pt follow strict improvement (fix 2).

    fairseq's `save_checkpoint` keeps the best score on itself (`save_checkpoint.best`,
    looked up through the module global, so on this wrapper once installed) and saves
    best when `score >= best`. Handing it `val_loss=None` for a non-improving score saves
    only checkpoint_last.pt and leaves the best score alone.
    """
    from fairseq import checkpoint_utils

    original = checkpoint_utils.save_checkpoint

    def save_checkpoint(cfg, trainer, epoch_itr, val_loss):  # type: ignore[no-untyped-def]
        best = getattr(save_checkpoint, "best", None)
        if val_loss is not None and best is not None:
            improves = val_loss > best if cfg.maximize_best_checkpoint_metric else val_loss < best
            if not improves:
                val_loss = None
        return original(cfg, trainer, epoch_itr, val_loss)

    checkpoint_utils.save_checkpoint = save_checkpoint


def exact_accuracy() -> None:
    """Log sentence_prediction's accuracy from counts, unrounded (fix 8).

    fairseq's `reduce_metrics` runs per step (per validation batch) on that step's
    logging outputs and feeds active aggregators, of which validation opens a fresh one
    per subset. Its own `accuracy` (an `AverageMeter`, rounded to 0.1 for display and
    averaged from per-batch percentages) is replaced by two sum meters, `correct` and
    `total` (`fairseq.ACCURACY_COUNTS`), and a derived `accuracy` that is
    `accuracy_percent(correct, total)` of those sums: over a validation subset, exactly
    the float HF and `--evaluate` compute from the same counts. fairseq's best metric
    (`--best-checkpoint-metric accuracy`) reads that derived value. Sum meters are part
    of fairseq's checkpointed metric state, so a resumed run keeps them; the derived
    meter is not saved and is re-added by the next step. Criteria without `ncorrect`
    (regression heads, masked_lm) are left as they are. Validation and test batches
    also bring per-class counts (`class_counts`), logged the same way with a derived
    `macro_f1` (`--best-checkpoint-metric macro_f1` reads it).
    """
    from fairseq.criterions.sentence_prediction import SentencePredictionCriterion
    from fairseq.logging import metrics

    from sweeper.trainers.fairseq.fairseq_trainer import ACCURACY_COUNTS
    from sweeper.trainers.metrics import accuracy_percent

    correct_key, total_key = ACCURACY_COUNTS
    original = SentencePredictionCriterion.reduce_metrics

    def derived_accuracy(meters) -> float | None:  # type: ignore[no-untyped-def]
        total = meters[total_key].sum
        return accuracy_percent(meters[correct_key].sum, total) if total else None

    def reduce_metrics(logging_outputs) -> None:  # type: ignore[no-untyped-def]
        if not (logging_outputs and "ncorrect" in logging_outputs[0]):
            original(logging_outputs)
            return
        dropped = ("ncorrect", CLASS_COUNTS)
        original([{k: v for k, v in log.items() if k not in dropped} for log in logging_outputs])
        correct = sum(int(log.get("ncorrect", 0)) for log in logging_outputs)
        total = sum(int(log.get("nsentences", 0)) for log in logging_outputs)
        metrics.log_scalar_sum(correct_key, correct)
        metrics.log_scalar_sum(total_key, total)
        metrics.log_derived("accuracy", derived_accuracy)
        log_class_counts(logging_outputs)

    SentencePredictionCriterion.reduce_metrics = staticmethod(reduce_metrics)
    class_counts()


CLASS_COUNTS = "sweeper_class_counts"
"""A validation logging output's per-class counts: a (3, classes) tensor of TP, FP, FN."""


def class_counts() -> None:
    """Count per-class TP/FP/FN at validation and test (the macro-F1 of fix 8).

    sentence_prediction's `forward` keeps only the number of correct predictions. In
    eval mode (validation and test subsets, never training updates) the classification
    head's output is caught with a forward hook, so nothing is computed twice, and the
    batch's TP, FP and FN per class (`bincount` over the head's classes) go into its
    logging output. `log_class_counts` sums them into one sum meter per class and
    count (`fairseq.class_count_key`: `tp_c0`, ...) and derives `macro_f1` from those
    sums with `metrics.macro_f1_percent`, as HF and `--evaluate` do from theirs.
    """
    import torch
    from fairseq.criterions.sentence_prediction import SentencePredictionCriterion

    original = SentencePredictionCriterion.forward

    def forward(self, model, sample, reduce=True):  # type: ignore[no-untyped-def]
        heads = getattr(model, "classification_heads", None)
        if model.training or self.regression_target or not heads:
            return original(self, model, sample, reduce)
        caught: list[torch.Tensor] = []
        hook = heads[self.classification_head_name].register_forward_hook(
            lambda _module, _inputs, output: caught.append(output)
        )
        try:
            loss, sample_size, logging_output = original(self, model, sample, reduce)
        finally:
            hook.remove()
        logits = caught[-1]
        targets = model.get_targets(sample, [logits]).view(-1)
        predicted = logits.argmax(dim=-1).view(-1)
        classes = logits.size(-1)
        tp = torch.bincount(targets[predicted == targets], minlength=classes)
        as_predicted = torch.bincount(predicted, minlength=classes)
        as_true = torch.bincount(targets, minlength=classes)
        logging_output[CLASS_COUNTS] = torch.stack([tp, as_predicted - tp, as_true - tp]).cpu()
        return loss, sample_size, logging_output

    SentencePredictionCriterion.forward = forward


def log_class_counts(logging_outputs) -> None:  # type: ignore[no-untyped-def]
    """Sum meters of the subset's per-class counts and the derived `macro_f1`; nothing
    for outputs without counts (training updates)."""
    from fairseq.logging import metrics

    from sweeper.trainers.fairseq.fairseq_trainer import CLASS_COUNT_KINDS, class_count_key

    counted = [log[CLASS_COUNTS] for log in logging_outputs if CLASS_COUNTS in log]
    if not counted:
        return
    rows = sum(counted[1:], counted[0]).tolist()
    for kind, row in zip(CLASS_COUNT_KINDS, rows, strict=True):
        for c, value in enumerate(row):
            metrics.log_scalar_sum(class_count_key(kind, c), int(value))
    metrics.log_derived("macro_f1", derived_macro_f1)


def derived_macro_f1(meters) -> float | None:  # type: ignore[no-untyped-def]
    """`macro_f1_percent` of the subset's per-class sums; None before any count."""
    from sweeper.trainers.fairseq.fairseq_trainer import counts_from

    counts = counts_from({key: meter.sum for key, meter in meters.items() if hasattr(meter, "sum")})
    return counts.macro_f1() if counts is not None and counts.present() else None


def whole_integers_in_logs() -> None:
    """Write integers in fairseq's logs with every digit (fix 9); everything else as
    fairseq formats it."""
    from fairseq.logging import progress_bar

    original = progress_bar.format_stat

    def format_stat(stat):  # type: ignore[no-untyped-def]
        if isinstance(stat, int) and not isinstance(stat, bool):
            return str(stat)
        return original(stat)

    progress_bar.format_stat = format_stat


def repair_last_checkpoint(save_dir: Path) -> None:
    """Replace a torn checkpoint_last.pt by checkpoint_best.pt (fix 3).

    A torn last can only come from the copy best -> last (fairseq's own writes are
    atomic renames), so best then holds exactly the state last was meant to hold.
    """
    last, best = save_dir / LAST, save_dir / BEST
    if not last.exists() or zipfile.is_zipfile(last):
        return
    if not zipfile.is_zipfile(best):
        raise RuntimeError(f"{last} is damaged and there is no intact {best.name} to restore")
    print(f"sweeper: {last} is incomplete (killed mid-copy); restoring it from {best.name}")
    temp = last.with_name(LAST + ".repair")
    shutil.copyfile(best, temp)
    os.replace(temp, last)


def drop_training_state(checkpoint: Path) -> None:
    """Strip the Adam moments from a finished trial's checkpoint_best.pt (2/3 of its
    size): only checkpoint_last.pt is ever resumed from, while best is what gets
    evaluated and logged to MLflow. Rewritten atomically."""
    import torch

    if not checkpoint.is_file():
        return
    state = torch.load(checkpoint, map_location="cpu")
    if state.pop("last_optimizer_state", None) is None:
        return
    temp = checkpoint.with_name(checkpoint.name + ".slim")
    torch.save(state, temp)
    os.replace(temp, checkpoint)


def restore_numpy_compat() -> None:
    """Give numpy 2 back the one `numpy.compat` name fairseq uses (fix 5)."""
    import types

    import numpy

    if not hasattr(numpy, "compat"):
        numpy.compat = types.SimpleNamespace(long=numpy.int64)  # type: ignore[attr-defined]


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (fix 4); no-op elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)
    if prctl is not None:
        prctl(pr_set_pdeathsig, signal.SIGKILL)


def bf16_without_tpu(argv: list[str]) -> None:
    """Keep `--bf16` on the trial's device (fix 7): fairseq's argument post-processing
    sets `tpu` whenever `bf16` is set; reset it when `--tpu` was not asked for."""
    from fairseq import options

    if "--tpu" in argv:
        return
    original = options.parse_args_and_arch

    def parse_args_and_arch(*args, **kwargs):  # type: ignore[no-untyped-def]
        parsed = original(*args, **kwargs)
        parsed.tpu = False
        return parsed

    options.parse_args_and_arch = parse_args_and_arch


def _save_dir(argv: list[str]) -> Path | None:
    """The --save-dir in fairseq-train arguments (either spelling), if given."""
    for index, arg in enumerate(argv):
        if arg == "--save-dir" and index + 1 < len(argv):
            return Path(argv[index + 1])
        if arg.startswith("--save-dir="):
            return Path(arg.split("=", 1)[1])
    return None


def main(argv: list[str]) -> None:
    """fairseq-train with the module docstring's fixes; takes its arguments unchanged."""
    notice = Notice().install()
    die_with_parent()
    save_dir = _save_dir(argv)
    if save_dir is not None:
        repair_last_checkpoint(save_dir)
    # First: fairseq_cli.train sets the log format (`DATE | LEVEL | TAG | MSG`) before
    # anything in fairseq logs; importing fairseq earlier would install Python's default.
    from fairseq_cli import train

    allow_fairseq_checkpoints()
    keep_earliest_best()
    exact_accuracy()
    whole_integers_in_logs()
    restore_numpy_compat()
    bf16_without_tpu(argv)
    seeds = FairseqSeeds.of_save_dir(save_dir)
    if seeds is not None:
        seeds.install()
    stop = FairseqNotice(notice).install()
    sys.argv = ["fairseq-train", *argv]
    train.cli_main()
    if stop.stopped_at is not None:
        exit_now(notice.preempted(stop.stopped_at))
    if save_dir is not None:
        drop_training_state(save_dir / BEST)
        write_counts(save_dir)
        write_predictions(save_dir)
    exit_now()


def write_counts(save_dir: Path) -> None:
    """The trained classifier's parameter counts into the trial folder (the save dir's
    parent: `TrialJob.checkpoint_dir`), as the HF child writes them: counted here,
    where torch is loaded, not in the Ray worker after the trainer ends. Only a trial's
    save dir (its folder holds the job): the pretraining stage's needs no counts."""
    from sweeper import record_names
    from sweeper.trainers.base import write_param_counts
    from sweeper.trainers.fairseq.fairseq_trainer import count_parameters

    trial = save_dir.parent
    checkpoint = save_dir / LAST if (save_dir / LAST).is_file() else save_dir / BEST
    if (trial / record_names.TRIAL_CONFIG_FILE).is_file() and checkpoint.is_file():
        count = count_parameters(checkpoint)
        write_param_counts(trial, count, count)


if __name__ == "__main__":
    main(sys.argv[1:])
