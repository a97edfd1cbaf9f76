"""`sweeper summarize --evaluate`: measure each counted trial's stored best checkpoint again.

Table 1's test accuracy is what the trainer logged at the best validation step. This
checks that record against the artifact people will reuse: download the run's
`checkpoints/best` and `trial.json`, reload the checkpoint with the trial's backend's
trainer (`Trainer.remeasure`: per-example predictions, every test metric counted from
them) and measure the prepared test split again. A mismatch means the
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

Example by example, too: a run tagged `sweeper.predictions` holds the test split's
per-example predictions of its best checkpoint (`predictions/test.json`, made in the
trial by the reload used here: `sweeper.trainers.reload`); the re-measurement's own
predictions (`Trainer.remeasure`, from which its metric is counted) are compared with
them per example, the predicted class (a causal LM's answer) and its correct flag.
Two predictions whose errors cancel leave the accuracy alone but not this check. A
run without the tag is checked by its metric alone and says "no stored predictions".

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
from sweeper.trainers import predictions
from sweeper.trainers.predictions import BEST, CheckpointPredictions, SplitPredictions, differing

if TYPE_CHECKING:
    from mlflow import MlflowClient


TOLERANCE = 0.01
"""The metric's unit, for metrics that are not counted (`EXACT_METRICS` agree exactly)."""
EXACT_METRICS = frozenset(
    {record_names.METRIC_TEST_ACC, record_names.METRIC_TEST_MACRO_F1, "test_exact_match"}
)
"""Percentages of counted examples (macro-F1: of per-class counts): recorded and
re-measured by one expression on integer counts, so they must be equal."""


SPLIT = "test"
"""The split `--evaluate` re-measures: the one the tables report."""


SHOWN_IDS = 5
"""How many differing example ids a verdict names (the JSON holds them all)."""


@dataclass(frozen=True)
class Evaluation:
    """One trial's recorded test accuracy next to the re-measured one, and its stored
    per-example predictions next to the re-made ones."""

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
    examples: int | None = None
    """Test examples whose stored prediction was compared; None when the run stores
    none (or it was not measured)."""
    differing: tuple[int, ...] = ()
    """Ids of the compared examples whose stored prediction the re-measurement does not
    repeat (another class or answer, or another correct flag)."""
    predictions_problem: str | None = None
    """Why the stored predictions could not be compared (unreadable, another number of
    examples); None when compared or when there are none."""

    @property
    def metric_agrees(self) -> bool:
        if self.measured is None:
            return False
        if self.exact:
            return self.measured == self.recorded
        return abs(self.measured - self.recorded) <= TOLERANCE

    @property
    def agrees(self) -> bool:
        """The metric agrees, and so does every compared example."""
        return self.metric_agrees and not self.differing and self.predictions_problem is None

    @property
    def examples_verdict(self) -> str:
        """`189 of 189 examples agree`, `2 of 189 examples differ (ids 4, 17)`, or why
        they were not compared."""
        if self.predictions_problem is not None:
            return f"stored predictions: {self.predictions_problem}"
        if self.examples is None:
            return "no stored predictions"
        if not self.differing:
            return f"{self.examples} of {self.examples} examples agree"
        shown = ", ".join(str(i) for i in self.differing[:SHOWN_IDS])
        more = ", ..." if len(self.differing) > SHOWN_IDS else ""
        return f"{len(self.differing)} of {self.examples} examples differ (ids {shown}{more})"

    @property
    def verdict(self) -> str:
        if self.measured is None:
            return f"not measured: {self.problem}"
        if not self.metric_agrees:
            return f"MISMATCH ({self.measured - self.recorded:+.3g}; {self.examples_verdict})"
        if self.agrees:
            return f"ok ({self.examples_verdict})"
        head = "NOT COMPARED" if self.predictions_problem is not None else "EXAMPLES DIFFER"
        return f"{head} ({self.examples_verdict})"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "differing": list(self.differing), "agrees": self.agrees}


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
            try:
                found = measure(
                    client, trial.run_id, Path(tmp), metric, trial.best_step, trial.predictions
                )
            except (FileNotFoundError, OSError) as exc:
                found = Remeasured(problem=str(exc))
        evaluation = Evaluation(
            trial.run_id,
            trial.run_name,
            trial.framework,
            trial.best_step,
            trial.test_value,
            found.value,
            found.problem,
            exact=metric in EXACT_METRICS,
            **found.comparison(),
        )
        evaluations.append(evaluation)
        line = f"evaluate {number}/{len(trials)} {trial.run_name}: {evaluation.verdict}"
        log(line if number < len(trials) else f"{line} ({tally(evaluations, metric)})")
    return evaluations


@dataclass(frozen=True)
class Remeasured:
    """What `measure` found for one run: the metric again, and its stored predictions
    beside the re-made ones (None where the run stores none)."""

    value: float | None = None
    problem: str | None = None
    stored: SplitPredictions | None = None
    again: CheckpointPredictions | None = None
    predictions_problem: str | None = None

    def comparison(self) -> dict[str, Any]:
        """`Evaluation`'s example fields: how many were compared, the ids that differ."""
        if self.predictions_problem is not None:
            return {"predictions_problem": self.predictions_problem}
        if self.stored is None or self.again is None:
            return {}
        try:
            positions = differing(self.stored.at(BEST), self.again)
        except ValueError as exc:
            return {"predictions_problem": str(exc)}
        ids = tuple(self.stored.ids[k] for k in positions)
        return {"examples": len(self.stored.ids), "differing": ids}


def measure(
    client: MlflowClient,
    run_id: str,
    tmp: Path,
    metric: str = record_names.METRIC_TEST_ACC,
    step: int = 0,
    held: Sequence[str] = (),
) -> Remeasured:
    """Test `metric` (accuracy, macro-F1 in %, ...) of run `run_id`'s stored best
    checkpoint (recorded at `step`), with the run's stored test predictions (where
    `held`, the splits its `sweeper.predictions` tag lists, has them) and the
    re-measurement's."""
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
    stored, problem = _stored_predictions(client, run_id, tmp, held)
    job = TrialJob.load(Path(config))
    trainer = get_trainer(job.framework, job.task)
    for path in trainer.reload_inputs(job):  # what the trainer reloads must be here
        if not Path(path).exists():
            raise FileNotFoundError(f"prepared input not on this machine: {path}")
    found = trainer.remeasure(job, Path(checkpoint), SPLIT, step)
    measured = found.logged(SPLIT)
    if metric not in measured:
        raise FileNotFoundError(f"the {job.framework} trainer does not re-measure {metric}")
    return Remeasured(
        measured[metric], stored=stored, again=found.predictions, predictions_problem=problem
    )


def _stored_predictions(
    client: MlflowClient, run_id: str, tmp: Path, held: Sequence[str]
) -> tuple[SplitPredictions | None, str | None]:
    """The run's stored predictions of `SPLIT` (None where `held`, the splits its
    `sweeper.predictions` tag lists, lacks it), or why they could not be read."""
    from mlflow.exceptions import MlflowException

    if SPLIT not in held:
        return None, None
    try:
        path = client.download_artifacts(run_id, predictions.artifact_path(SPLIT), str(tmp))
        stored = predictions.read(Path(path))
        stored.at(BEST)
    except MlflowException as exc:
        return None, f"artifact missing: {exc.message.splitlines()[0]}"
    except (KeyError, ValueError, OSError) as exc:
        return None, f"{predictions.artifact_path(SPLIT)}: {exc}"
    return stored, None


def mismatches(evaluations: Sequence[Evaluation]) -> list[Evaluation]:
    """Trials whose stored checkpoint could not be measured or disagrees."""
    return [e for e in evaluations if not e.agrees]


def tally(evaluations: Sequence[Evaluation], metric: str | None = None) -> str:
    """The count of agreeing trials, "k of n agree", with the rule they agree by when
    `metric` is given; then, where stored predictions were compared, the count of
    agreeing examples over those trials ("2268 of 2268 test examples agree"), and how
    many trials had none to compare."""
    agree = len(evaluations) - len(mismatches(evaluations))
    text = f"{agree} of {len(evaluations)} agree"
    if metric is not None:
        text += ", exactly" if metric in EXACT_METRICS else f", within {TOLERANCE}"
    compared = [e for e in evaluations if e.examples is not None]
    if not compared:
        return text
    total = sum(e.examples or 0 for e in compared)
    same = total - sum(len(e.differing) for e in compared)
    text += f"; {same} of {total} test examples agree"
    without = len(evaluations) - len(compared)
    return text + (f" ({without} trial(s) not compared example by example)" if without else "")


def examples_cell(evaluation: Evaluation) -> str:
    """evaluation.md's "Examples agree": `187 of 189`, or empty where none were compared."""
    if evaluation.examples is None:
        return ""
    return f"{evaluation.examples - len(evaluation.differing)} of {evaluation.examples}"


def to_markdown(
    evaluations: Sequence[Evaluation], metric: str = record_names.METRIC_TEST_ACC
) -> str:
    title = "Test accuracy" if metric == record_names.METRIC_TEST_ACC else metric
    rule = "exact" if metric in EXACT_METRICS else f"tolerance {TOLERANCE}"
    lines = [
        f"## {title} re-measured from the stored best checkpoints ({rule})",
        "",
        "| Trial | Framework | Best step | Recorded | Re-measured | Examples agree | Verdict |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for e in evaluations:
        measured = "" if e.measured is None else f"{e.measured:.2f}"
        lines.append(
            f"| {e.run_name} | {e.framework} | {e.best_step} | {e.recorded:.2f} | "
            f"{measured} | {examples_cell(e)} | {e.verdict} |"
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
