"""Names shared by everything that writes or reads a sweep's record.

The trainers write metric events, the sweep engine turns them into MLflow runs, and the
summariser reads those runs back. Keeping every name in this one module is what lets
the three agree without importing each other.

Metric event (one JSON object per line in `events.jsonl`, see `sweeper.trainers.events`):
  {"step": 225, "epoch": 1.0, "split": "valid", "loss": 0.61, "accuracy": 71.5,
   "lr": 9.4e-05, "wall_time": 12.3}
`split` is `train`, `valid` or `test`; accuracy is a percentage (0-100) as in the lab's
tables, null for `train`; step is the number of optimizer updates so far. Evaluations
may add `"metrics": {name: value}`, logged as `valid_<name>` / `test_<name>`: a
classifier's `macro_f1` and per-class `precision_class<c>`, `recall_class<c>`,
`f1_class<c>` (percent, class c = position in `data.labels`, every class that occurs
in the split's labels or predictions; `sweeper.trainers.metrics`); a causal LM's
`perplexity` and `exact_match`.

MLflow layout:
  experiment  = the sweep name (or spec.tracking.experiment)
  parent run  = the sweep, tagged `sweeper.role=sweep`
  child run   = one trial, tagged `sweeper.role=trial` and `mlflow.parentRunId`
  metrics     = METRIC_NAMES at step = update number; BEST_METRIC_NAMES once a trial
                finishes; `system/...` samples (sweeper.tune.system_metrics); `cost/...`
                per attempt and in total (sweeper.tracking.cost_ledger)
"""

from __future__ import annotations

from enum import StrEnum

# Tags on every run.
TAG_ROLE = "sweeper.role"  # "sweep" | "trial"
ROLE_SWEEP = "sweep"
ROLE_TRIAL = "trial"
TAG_SWEEP = "sweeper.sweep"  # sweep name
TAG_RECORD_VERSION = "sweeper.record_version"
"""Sweep runs: the format version of the sweep's record, set when the run is created
(`sweeper.tracking.record_format`; absent: version 1)."""

# Tags on trial runs.
TAG_TRIAL_KEY = "sweeper.trial_key"
TAG_GROUP = "sweeper.group"  # e.g. "fairseq/pretrained/full"
TAG_SEED = "sweeper.seed"
TAG_SEED_SOURCE = "sweeper.seed_source"
"""Trial runs: which randomness the trial's seed set (`SEED_ALL`, or one of
`SEED_SOURCES` while the others are held); absent on records made before it: `SEED_ALL`."""
SEED_ALL = "all"
SEED_INIT, SEED_DATA_ORDER, SEED_DROPOUT = "init", "data_order", "dropout"
SEED_SOURCES = (SEED_INIT, SEED_DATA_ORDER, SEED_DROPOUT)
"""The sources of a trial's randomness that a sweep can vary one at a time: the initial
weights (random init, classifier head, LoRA adapters), the order of training examples,
and the dropout masks."""
TAG_PREDICTIONS = "sweeper.predictions"
"""Trial runs whose per-example predictions were uploaded: the splits, comma-separated
(`valid,test`), so a summary downloads only files that exist."""
TAG_SEED_OF = {source: f"sweeper.seed.{source}" for source in SEED_SOURCES}
"""Trial runs: the seed each source ran with."""
TAG_START_WEIGHTS = "sweeper.start_weights"
"""Trial runs: the digest of the weights the trainer started training from, as it
measured them (`trainers/seed_evidence.py`); trials that hold the init seed share it
within a framework."""
TAG_DATA_ORDER = "sweeper.data_order"
"""Trial runs: the digest of the order the trainer was fed its training examples, every
epoch (`trainers/seed_evidence.py`); absent when an epoch was resumed part way."""
TAG_INIT = "sweeper.init"
TAG_FRAMEWORK = "sweeper.framework"
TAG_METHOD = "sweeper.method"
TAG_STAGE = "sweeper.stage"  # a Stage: "grid" | "search" | "confirm"
TAG_STATUS = "sweeper.status"  # a Status: "finished" | "failed" | "early_stopped" | "running"
TAG_RAY_TRIAL_ID = "sweeper.ray_trial_id"
TAG_NODE = "sweeper.node"
TAG_ERROR = "sweeper.error"  # last lines of the error, for failed trials
TAG_TRAINABLE_PARAMS = "sweeper.trainable_params"
TAG_TOTAL_PARAMS = "sweeper.total_params"
TAG_SEARCH_PARAMS = "sweeper.search_params"  # search/confirm trials: JSON of the searched values
TAG_INPUTS = "sweeper.inputs"  # parent and trial runs: JSON {input: digest}, tracking/inputs.py
TAG_REPORT_DIGEST = "sweeper.report_digest"  # sweep runs: digest of the summary last logged to it
TAG_VERSIONS = "sweeper.versions"  # trial runs: JSON {package: version} on the node that trained
PARAM_PRECISION = "train.precision"  # trial runs: the recipe's arithmetic (flatten_params' name)
TAG_PREEMPTIONS = (
    "sweeper.preemptions"  # trial runs: how often the trial was preempted (and resumed)
)
TAG_PREEMPTED_ON = (
    "sweeper.preempted_on"  # trial runs: JSON [[step, node], ...], one per preemption
)

# Tags on the sweep (parent) run of a sweep with a search block.
TAG_SEARCH_METRIC = "sweeper.search_metric"  # e.g. "valid_accuracy"
TAG_SEARCH_MODE = "sweeper.search_mode"  # "max" | "min"
TAG_OPTUNA_STORAGE = "sweeper.optuna_storage"  # Optuna RDB URL holding one study per group


class Stage(StrEnum):
    """Which stage of a sweep made a trial run (the `sweeper.stage` tag)."""

    GRID = "grid"
    """A grid trial: one combination of the spec's grid."""
    SEARCH = "search"
    """A search trial: values sampled by Optuna on the tuning seed; never tabulated."""
    CONFIRM = "confirm"
    """A group's best searched values, re-run over every grid seed."""


class Status(StrEnum):
    """sweeper's own fate of a trial run (the `sweeper.status` tag). MLflow's run status
    alone cannot say it: an early-stopped trial is FINISHED there, and a crashed driver
    leaves runs RUNNING."""

    FINISHED = "finished"
    FAILED = "failed"
    EARLY_STOPPED = "early_stopped"
    RUNNING = "running"


class RunState(StrEnum):
    """MLflow's own run status, as its API spells it."""

    RUNNING = "RUNNING"
    SCHEDULED = "SCHEDULED"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"


# Metrics, logged with step = number of updates.
METRIC_TRAIN_LOSS = "train_loss"
METRIC_LR = "lr"
METRIC_VALID_LOSS = "valid_loss"
METRIC_VALID_ACC = "valid_accuracy"
METRIC_TEST_LOSS = "test_loss"
METRIC_TEST_ACC = "test_accuracy"
METRIC_VALID_MACRO_F1 = "valid_macro_f1"
METRIC_TEST_MACRO_F1 = "test_macro_f1"
METRIC_EPOCH = "epoch"
METRIC_WALL_TIME = "wall_time"  # seconds since the trial started, at that step
METRIC_NAMES = (
    METRIC_TRAIN_LOSS,
    METRIC_LR,
    METRIC_VALID_LOSS,
    METRIC_VALID_ACC,
    METRIC_TEST_LOSS,
    METRIC_TEST_ACC,
    METRIC_VALID_MACRO_F1,
    METRIC_TEST_MACRO_F1,
    METRIC_EPOCH,
    METRIC_WALL_TIME,
)
# The best-validation checkpoint of a finished trial (the summariser's rule, invariant 3),
# logged once at the trial's last step, so the runs table shows what Table 1 shows
# rather than the last value of valid_accuracy / test_accuracy.
METRIC_BEST_VALID_ACC = "best_valid_accuracy"
METRIC_BEST_TEST_ACC = "best_test_accuracy"
METRIC_BEST_STEP = "best_step"
METRIC_BEST_EPOCH = "best_epoch"
BEST_METRIC_NAMES = (
    METRIC_BEST_VALID_ACC,
    METRIC_BEST_TEST_ACC,
    METRIC_BEST_STEP,
    METRIC_BEST_EPOCH,
)
"""A classification sweep's best-checkpoint metrics; a spec with another `select:`
names its own (`sweeper.selection.Selection.best_names`), all starting `best_`."""
METRIC_BEST_PREFIX = "best_"
METRIC_BEST_VALID_MACRO_F1 = "best_valid_macro_f1"
METRIC_BEST_TEST_MACRO_F1 = "best_test_macro_f1"
HEADLINE_METRICS = (METRIC_VALID_ACC, METRIC_TEST_ACC, METRIC_VALID_MACRO_F1, METRIC_TEST_MACRO_F1)
"""Also logged at the best checkpoint (`best_` + name) whatever the selection, when the
trial measured them (`selection.best_metrics`): a classifier's runs table shows
accuracy and macro-F1 of the checkpoint Table 1 describes side by side. Per-class
values are logged at every evaluation, not as `best_` metrics."""

# What each task's trainers measure at every validation point: metric event fields
# (`loss`, `accuracy`) or entries of an event's `metrics`, logged as `valid_<name>` and
# `test_<name>`. Accuracy, macro-F1 and exact match are percentages (0-100), higher is
# better; loss and perplexity are better lower. Per-class values are measured too but
# are no selection or report metric (their set depends on the data).
TASK_CLASSIFICATION = "classification"
TASK_CAUSAL_LM = "causal_lm"
TASK_METRICS = {
    TASK_CLASSIFICATION: ("loss", "accuracy", "macro_f1"),
    TASK_CAUSAL_LM: ("loss", "perplexity", "exact_match"),
}
HIGHER_IS_BETTER = frozenset({"accuracy", "macro_f1", "exact_match"})
PERCENT_METRICS = frozenset({"accuracy", "macro_f1", "exact_match"})
TAG_SELECT = "sweeper.select"
"""Sweep runs whose spec sets `select:`: its JSON, for `summarize --experiment` (no spec)."""
TAG_SEQUENTIAL_PLAN = "sweeper.sequential_plan"
"""Sweep runs of `sweeper run --until-decided`: the plan's JSON (`SequentialPlan`),
set before the first look; the summary decides by it."""

# The cost ledger (`sweeper.tracking.cost_ledger`): what each trial held and used, written
# by the driver when an attempt ends. An attempt runs from Ray starting the trial to the
# trial's end (finished, early-stopped, failed, retried, interrupted, preempted).
# Per attempt, at step = attempt number (1, 2, ...):
METRIC_ATTEMPT_WALL = "cost/attempt_wall_seconds"  # seconds the attempt held its resources
METRIC_ATTEMPT_CPU = "cost/attempt_cpu_seconds"  # resources.cpu x wall
METRIC_ATTEMPT_GPU = "cost/attempt_gpu_seconds"  # resources.gpu x wall
METRIC_ATTEMPT_LOST = "cost/attempt_lost"  # 1: ended without ending its trial (work lost)
METRIC_ATTEMPT_CPU_TIME = "cost/attempt_cpu_time_seconds"  # measured CPU time (process tree)
METRIC_ATTEMPT_GPU_TIME = "cost/attempt_gpu_time_seconds"  # measured GPU busy time (NVML)
ATTEMPT_METRICS = (
    METRIC_ATTEMPT_WALL,
    METRIC_ATTEMPT_CPU,
    METRIC_ATTEMPT_GPU,
    METRIC_ATTEMPT_LOST,
    METRIC_ATTEMPT_CPU_TIME,
    METRIC_ATTEMPT_GPU_TIME,
)
# Running totals over every attempt of the run (resumed sweeps included), at step = the
# attempt number: a run's latest value is its total. The parent run holds the same names,
# summed over the sweep's trial runs when a summary is logged to it.
METRIC_COST_ATTEMPTS = "cost/attempts"
METRIC_COST_LOST_ATTEMPTS = "cost/lost_attempts"
METRIC_COST_WALL = "cost/wall_seconds"
METRIC_COST_CPU = "cost/cpu_seconds"  # held CPU-seconds
METRIC_COST_GPU = "cost/gpu_seconds"  # held GPU-seconds
METRIC_COST_LOST_CPU = "cost/lost_cpu_seconds"  # held by lost attempts
METRIC_COST_LOST_GPU = "cost/lost_gpu_seconds"
METRIC_COST_CPU_TIME = "cost/cpu_time_seconds"  # measured
METRIC_COST_GPU_TIME = "cost/gpu_time_seconds"  # measured, where a GPU was sampled
COST_TOTALS = (
    METRIC_COST_ATTEMPTS,
    METRIC_COST_LOST_ATTEMPTS,
    METRIC_COST_WALL,
    METRIC_COST_CPU,
    METRIC_COST_GPU,
    METRIC_COST_LOST_CPU,
    METRIC_COST_LOST_GPU,
    METRIC_COST_CPU_TIME,
    METRIC_COST_GPU_TIME,
)
REPORT_TAGS = "run_tags"
"""Tune report field: JSON {tag: value} the trial sets on its run with that report (its
final report's seed evidence, `TAG_START_WEIGHTS` and `TAG_DATA_ORDER`), written in
the report's own batch."""
REPORT_CPU_TIME = "cpu_time_seconds"
"""Tune report field: CPU seconds the trial's process tree used since this attempt
started (`sweeper.tune.system_metrics.SystemSampler.cpu_seconds`)."""
REPORT_GPU_TIME = "gpu_time_seconds"
"""Tune report field: GPU busy seconds of this attempt, from sampled utilization; absent
when no GPU is visible to the trial."""
TAG_COST = "sweeper.cost"
"""Sweep runs whose spec sets `cost:`: its JSON (prices), for `summarize --experiment`."""

# Artifacts of a trial run.
ARTIFACT_BEST_CHECKPOINT = "checkpoints/best"
ARTIFACT_TRIAL_CONFIG = "trial.json"
ARTIFACT_TRAINER_LOG = "trainer.log"
ARTIFACT_EVENTS = "events.jsonl"
ARTIFACT_PREDICTIONS_DIR = "predictions"
"""Per-example predictions, one file per split (`sweeper.trainers.predictions`)."""

# Artifacts of the sweep (parent) run.
ARTIFACT_SPEC = "spec.yaml"
ARTIFACT_RESOLVED_SPEC = "spec.resolved.json"
ARTIFACT_SPEC_BASES = "spec.bases"
"""The files a spec `extends:`, nearest first: `spec.bases/1-demo.yaml`, ..."""
ARTIFACT_REPORT_DIR = "report"

# Files in a trial's local output folder (what `sweeper trial --out DIR` writes).
EVENTS_FILE = "events.jsonl"
TRAINER_LOG_FILE = "trainer.log"
PREEMPTIONS_FILE = "preemptions.jsonl"  # a trial's preemptions, one JSON object per line
TRIAL_CONFIG_FILE = "trial.json"
SEEDS_FILE = "seeds.json"  # what a trainer measured of its seeds (trainers/seed_evidence.py)
CHECKPOINT_DIR = "checkpoints"
PREDICTIONS_DIR = "predictions"
RESULT_FILE = "result.json"
