"""`sweeper summarize --evaluate`: measure each counted trial's stored best checkpoint again.

Table 1's test accuracy is what the trainer logged at the best validation step. This
checks that record against the artifact people will reuse: download the run's
`checkpoints/best` and `trial.json`, reload the checkpoint with the trial's backend's
trainer (`Trainer.test_accuracy`; every other test metric, `Trainer.test_metrics`)
and measure the prepared test split again. A mismatch means the
stored checkpoint is not the one the table describes (or the data changed), which is
exactly what a reader of the table needs to know.

Accuracy, macro-F1 (and a causal LM's exact match) must agree exactly, not within a
tolerance: the trainers record them and the reload re-measures them from integer
counts (`accuracy_percent(correct, total)`, `macro_f1_percent` of per-class TP/FP/FN;
`sweeper.trainers.metrics`), each the nearest float to an exact fraction of the counts,
so the same predictions give the same float bit for bit, and one prediction more or
less moves it far above any rounding. Other metrics (loss,
perplexity) are sums of floats whose order and device may differ between a trainer and
a reload; they agree within `TOLERANCE`.

The trial's prepared data must be on this machine (trial.json names its folders); when
it is not, the trial is reported as not measured, with the missing path.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper import record_names
from sweeper.summarize.records import CountedTrial

if TYPE_CHECKING:
    from mlflow import MlflowClient


TOLERANCE = 0.01
"""The metric's unit, for metrics that are not counted (`EXACT_METRICS` agree exactly)."""
EXACT_METRICS = frozenset(
    {record_names.METRIC_TEST_ACC, record_names.METRIC_TEST_MACRO_F1, "test_exact_match"}
)
"""Percentages of counted examples (macro-F1: of per-class counts): recorded and
re-measured by one expression on integer counts, so they must be equal."""


@dataclass(frozen=True)
class Evaluation:
    """One trial's recorded test accuracy next to the re-measured one."""

    run_id: str
    run_name: str
    framework: str
    best_step: int
    recorded: float
    measured: float | None
    problem: str | None = None
    """Why it could not be measured (missing artifact or data); None when measured."""
    exact: bool = True
    """Whether the metric must agree exactly (`EXACT_METRICS`) or within `TOLERANCE`."""

    @property
    def agrees(self) -> bool:
        if self.measured is None:
            return False
        if self.exact:
            return self.measured == self.recorded
        return abs(self.measured - self.recorded) <= TOLERANCE

    @property
    def verdict(self) -> str:
        if self.measured is None:
            return f"not measured: {self.problem}"
        return "ok" if self.agrees else f"MISMATCH ({self.measured - self.recorded:+.3g})"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "agrees": self.agrees}


def evaluate_trials(
    client: MlflowClient,
    trials: Sequence[CountedTrial],
    log: Callable[[str], None],
    metric: str = record_names.METRIC_TEST_ACC,
) -> list[Evaluation]:
    """Re-measure every trial in `trials` (Table 1's rows), one at a time: `metric` is
    the summary's reported test metric (`Selection.primary`). `log` gets one line per
    trial, its verdict, as it is measured; the last one ends with the `tally`."""
    import os

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one line per trial
    evaluations = []
    for number, trial in enumerate(trials, 1):
        with tempfile.TemporaryDirectory(prefix="sweeper-evaluate-") as tmp:
            measured, problem = None, None
            try:
                measured = measure(client, trial.run_id, Path(tmp), metric)
            except (FileNotFoundError, OSError) as exc:
                problem = str(exc)
        found = Evaluation(
            trial.run_id,
            trial.run_name,
            trial.framework,
            trial.best_step,
            trial.test_value,
            measured,
            problem,
            exact=metric in EXACT_METRICS,
        )
        evaluations.append(found)
        line = f"evaluate {number}/{len(trials)} {trial.run_name}: {found.verdict}"
        log(line if number < len(trials) else f"{line} ({tally(evaluations, metric)})")
    return evaluations


def measure(
    client: MlflowClient, run_id: str, tmp: Path, metric: str = record_names.METRIC_TEST_ACC
) -> float:
    """Test `metric` (accuracy, macro-F1 in %, ...) of run `run_id`'s stored best
    checkpoint."""
    from mlflow.exceptions import MlflowException

    from sweeper.trainers.base import TrialJob
    from sweeper.trainers.registry import get_trainer

    try:
        config = client.download_artifacts(run_id, record_names.ARTIFACT_TRIAL_CONFIG, str(tmp))
        checkpoint = client.download_artifacts(
            run_id, record_names.ARTIFACT_BEST_CHECKPOINT, str(tmp)
        )
    except MlflowException as exc:
        raise FileNotFoundError(f"artifact missing: {exc.message.splitlines()[0]}") from None
    job = TrialJob.load(Path(config))
    trainer = get_trainer(job.framework, job.task)
    for path in trainer.reload_inputs(job):  # what the trainer reloads must be here
        if not Path(path).exists():
            raise FileNotFoundError(f"prepared input not on this machine: {path}")
    if metric == record_names.METRIC_TEST_ACC:
        return trainer.test_accuracy(job, Path(checkpoint))
    measured = trainer.test_metrics(job, Path(checkpoint))
    if metric not in measured:
        raise FileNotFoundError(f"the {job.framework} trainer does not re-measure {metric}")
    return measured[metric]


def mismatches(evaluations: Sequence[Evaluation]) -> list[Evaluation]:
    """Trials whose stored checkpoint could not be measured or disagrees."""
    return [e for e in evaluations if not e.agrees]


def tally(evaluations: Sequence[Evaluation], metric: str | None = None) -> str:
    """The count of agreeing trials, "k of n agree", with the rule they agree by when
    `metric` is given."""
    agree = len(evaluations) - len(mismatches(evaluations))
    text = f"{agree} of {len(evaluations)} agree"
    if metric is None:
        return text
    return text + (", exactly" if metric in EXACT_METRICS else f", within {TOLERANCE}")


def to_markdown(
    evaluations: Sequence[Evaluation], metric: str = record_names.METRIC_TEST_ACC
) -> str:
    title = "Test accuracy" if metric == record_names.METRIC_TEST_ACC else metric
    rule = "exact" if metric in EXACT_METRICS else f"tolerance {TOLERANCE}"
    lines = [
        f"## {title} re-measured from the stored best checkpoints ({rule})",
        "",
        "| Trial | Framework | Best step | Recorded | Re-measured | Verdict |",
        "|---|---|---:|---:|---:|---|",
    ]
    for e in evaluations:
        measured = "" if e.measured is None else f"{e.measured:.2f}"
        lines.append(
            f"| {e.run_name} | {e.framework} | {e.best_step} | {e.recorded:.2f} | "
            f"{measured} | {e.verdict} |"
        )
    lines += ["", f"{tally(evaluations)}."]
    return "\n".join(lines) + "\n"


def to_json(evaluations: Sequence[Evaluation]) -> str:
    return json.dumps([e.to_dict() for e in evaluations], indent=2) + "\n"


def write(
    evaluations: Sequence[Evaluation], out_dir: Path, metric: str = record_names.METRIC_TEST_ACC
) -> list[Path]:
    """evaluation.md and evaluation.json in `out_dir` (for --out and the parent run)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "evaluation.md", out_dir / "evaluation.json"]
    paths[0].write_text(to_markdown(evaluations, metric), encoding="utf-8")
    paths[1].write_text(to_json(evaluations), encoding="utf-8")
    return paths
