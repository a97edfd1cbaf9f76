"""`summarize()` and `sweeper summarize` against real MLflow SQLite stores.

One store per module (creating a SQLite store runs MLflow's migrations, ~3 s), with
one experiment per scenario, written through MlflowClient exactly as the sweep engine
writes trials: a parent run tagged role=sweep, child runs with the layout's tags and
step metrics. Assertions are on values: which step was chosen, which test accuracy,
which runs were left out and why, and the statistics.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace

import pytest
import scipy.stats

from sweeper import record_names
from sweeper.cli.main import main
from sweeper.summarize import SummarizeError, SummaryRequest, summarize

# The module's store takes a few seconds to create (MLflow's SQLite migrations).
pytestmark = pytest.mark.integration

STEPS = (225, 450, 675, 900, 1125)
T0 = 1_700_000_000_000  # ms; runs start at T0 + i seconds so their order is known


@dataclass
class Trial:
    """A trial run to write: its tags, histories and statuses."""

    framework: str
    init: str
    seed: int
    valid: list[tuple[int, float]]
    test: list[tuple[int, float]]
    method: str = "full"
    sweep: str | None = None
    key: str | None = None
    status: str = record_names.Status.FINISHED
    mlflow_status: str = "FINISHED"
    stage: str = "grid"
    error: str | None = None
    trainable: int | None = None
    extra_tags: dict[str, str] = field(default_factory=dict)

    @property
    def group(self) -> str:
        return f"{self.framework}/{self.init}/{self.method}"


def write_trial(client, experiment_id: str, parent_id: str | None, trial: Trial, order: int):
    """Write one trial run as the engine would: tags, step metrics, terminal status."""
    from mlflow.entities import Metric
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    tags = {
        record_names.TAG_ROLE: record_names.ROLE_TRIAL,
        record_names.TAG_TRIAL_KEY: trial.key or f"{trial.group}-s{trial.seed}",
        record_names.TAG_GROUP: trial.group,
        record_names.TAG_SEED: str(trial.seed),
        record_names.TAG_INIT: trial.init,
        record_names.TAG_FRAMEWORK: trial.framework,
        record_names.TAG_METHOD: trial.method,
        record_names.TAG_STATUS: trial.status,
        record_names.TAG_STAGE: trial.stage,
        **trial.extra_tags,
    }
    if parent_id:
        tags[MLFLOW_PARENT_RUN_ID] = parent_id
    if trial.sweep:
        tags[record_names.TAG_SWEEP] = trial.sweep
    if trial.error:
        tags[record_names.TAG_ERROR] = trial.error
    if trial.trainable is not None:
        tags[record_names.TAG_TRAINABLE_PARAMS] = str(trial.trainable)
    start = T0 + 1000 * order
    run = client.create_run(
        experiment_id,
        start_time=start,
        tags=tags,
        run_name=f"{trial.framework}-{trial.init}-s{trial.seed}",
    )
    metrics = []
    for i, (step, value) in enumerate(trial.valid):
        ts = start + 10 * i
        metrics += [
            Metric(record_names.METRIC_VALID_ACC, value, ts, step),
            Metric(record_names.METRIC_EPOCH, step / 225, ts, step),
            Metric(record_names.METRIC_WALL_TIME, step / 10, ts, step),
            Metric(record_names.METRIC_VALID_LOSS, 1 - value / 100, ts, step),
        ]
    for i, (step, value) in enumerate(trial.test):
        metrics.append(Metric(record_names.METRIC_TEST_ACC, value, start + 10 * i + 1, step))
    client.log_batch(run.info.run_id, metrics=metrics)
    if trial.mlflow_status != "RUNNING":
        client.set_terminated(run.info.run_id, trial.mlflow_status, end_time=start + 500)
    return run.info.run_id


def write_experiment(client, name: str, trials: list[Trial], parent: bool = True) -> dict:
    """An experiment with a parent run (unless told not) and the given trials; its
    artifacts beside the store (MLflow's default, ./mlruns, is the working directory)."""
    from sweeper.tracking.store import sqlite_path

    db = sqlite_path(client.tracking_uri)
    location = (db.parent / "artifacts" / name).as_uri() if db is not None else None
    experiment_id = client.create_experiment(name, artifact_location=location)
    parent_id = None
    if parent:
        parent_run = client.create_run(
            experiment_id, start_time=T0, tags={record_names.TAG_ROLE: record_names.ROLE_SWEEP}
        )
        parent_id = parent_run.info.run_id
    ids = [write_trial(client, experiment_id, parent_id, t, i + 1) for i, t in enumerate(trials)]
    if parent_id:
        client.set_terminated(parent_id, "FINISHED")
    return {"experiment_id": experiment_id, "parent": parent_id, "runs": ids}


def lab_trials() -> list[Trial]:
    """Report 000's Table 1: best validation (value, step) and the test accuracy there.

    Every other step has a different test accuracy, so pairing the test value with the
    wrong step would show in the assertions.
    """
    table1 = [
        ("pretrained", 1, [70.0, 75.0, 78.0, 80.0, 81.5], 79.9),
        ("pretrained", 2, [72.0, 78.0, 80.0, 79.0, 79.5], 78.5),
        ("pretrained", 3, [74.0, 79.0, 82.0, 83.5, 83.0], 80.1),
        ("random", 1, [50.0, 55.0, 60.0, 62.0, 61.0], 65.4),
        ("random", 2, [58.0, 65.0, 64.0, 63.0, 64.5], 66.7),
        ("random", 3, [51.0, 55.0, 58.0, 60.0, 63.0], 67.4),
    ]
    trials = []
    for init, seed, valid, best_test in table1:
        best = STEPS[valid.index(max(valid))]
        test = [(s, best_test if s == best else 40.0 + s / 100) for s in STEPS]
        trials.append(
            Trial(
                "fairseq",
                init,
                seed,
                list(zip(STEPS, valid, strict=True)),
                test,
                sweep="lab",
                trainable=22_830_594,
            )
        )
    return trials


PAIRED_BASE = [70.0, 76.0, 81.0, 73.0, 79.0]  # seeds 1-5: seeds differ a lot
PAIRED_HF = [71.1, 76.9, 82.05, 74.0, 79.95]  # HF: about 1 point above on every seed


def paired_trials() -> list[Trial]:
    """fairseq vs HF from the same weights per seed: the seed moves both by several
    points, the framework by one. Paired on seed this decides; unpaired it cannot."""
    return [
        Trial(framework, "pretrained", seed, [(10, 60.0 + seed)], [(10, test)], sweep="paired")
        for framework, tests in (("fairseq", PAIRED_BASE), ("hf", PAIRED_HF))
        for seed, test in enumerate(tests, 1)
    ]


def pts(steps: list[int], values: list[float]) -> list[tuple[int, float]]:
    return list(zip(steps, values, strict=True))


def edge_trials() -> list[Trial]:
    """Every way a run can be left out, a tie, a re-logged step, and a group of n = 1."""
    s = [10, 20, 30, 40]
    return [
        # tie on 85.0 at steps 20 and 30: the earliest (20, test 70) wins over 30 (test 99)
        Trial("hf", "pretrained", 1, pts(s, [80, 85, 85, 84]), pts(s, [60, 70, 99, 98])),
        # a NaN validation value (step 50) is ignored, whatever the history path
        Trial(
            "hf",
            "pretrained",
            2,
            pts([*s, 50], [80, 88, 90, 89, math.nan]),
            pts([*s, 50], [60, 70, 75, 74, 0]),
        ),
        # seed 3: the earlier-started of two finished runs for one key is counted
        Trial(
            "hf",
            "pretrained",
            3,
            pts(s, [70, 91, 90, 80]),
            pts(s, [1, 80, 2, 3]),
            key="dup-key",
        ),
        Trial(
            "hf",
            "pretrained",
            3,
            pts(s, [70, 99, 90, 80]),
            pts(s, [1, 99, 2, 3]),
            key="dup-key",
        ),
        Trial(
            "hf",
            "pretrained",
            4,
            [(10, 50.0)],
            [(10, 50.0)],
            status=record_names.Status.FAILED,
            mlflow_status="FAILED",
            error="Traceback (most recent call last):\n  ...\nRuntimeError: CUDA out of memory\n",
        ),
        Trial(
            "hf",
            "pretrained",
            5,
            [(10, 50.0)],
            [(10, 50.0)],
            status=record_names.Status.RUNNING,
            mlflow_status="RUNNING",
        ),
        Trial(
            "hf",
            "pretrained",
            6,
            [(10, 50.0)],
            [(10, 50.0)],
            status=record_names.Status.EARLY_STOPPED,
        ),
        # best validation at 30, but test accuracy only logged at 10 and 20
        Trial("hf", "pretrained", 7, pts(s[:3], [60, 61, 62]), pts(s[:2], [50, 51])),
        Trial(
            "hf",
            "pretrained",
            8,
            pts(s, [99, 99, 99, 99]),
            pts(s, [9, 9, 9, 9]),
            stage="search",
        ),
        # n = 1 group; step 20 is logged twice (a resumed trial): the later values count
        Trial(
            "hf",
            "random",
            1,
            [(10, 50.0), (20, 60.0), (20, 65.0)],
            [(10, 40.0), (20, 50.0), (20, 55.0)],
        ),
    ]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One SQLite store holding every scenario's experiment."""
    from mlflow import MlflowClient

    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(uri)
    made = {
        "lab": write_experiment(client, "lab", lab_trials()),
        "edge": write_experiment(client, "edge", edge_trials()),
        "paired": write_experiment(client, "paired", paired_trials()),
        "noparent": write_experiment(client, "noparent", lab_trials()[:2], parent=False),
        "twosweeps": write_experiment(
            client,
            "twosweeps",
            [
                Trial("hf", "random", 1, [(1, 50.0)], [(1, 40.0)], sweep="a"),
                Trial("hf", "random", 1, [(1, 60.0)], [(1, 45.0)], sweep="b"),
            ],
        ),
    }
    # A run that is not sweeper's (no role tag) in the edge experiment.
    client.create_run(made["edge"]["experiment_id"], run_name="someone-elses")
    return {"uri": uri, "client": client, "root": root, **made}


# --- summarize(): selection and statistics -------------------------------------------


LAB_TABLE1 = [  # (init, seed, best valid, step, epoch, test)
    ("pretrained", 1, 81.5, 1125, 5.0, 79.9),
    ("pretrained", 2, 80.0, 675, 3.0, 78.5),
    ("pretrained", 3, 83.5, 900, 4.0, 80.1),
    ("random", 1, 62.0, 900, 4.0, 65.4),
    ("random", 2, 65.0, 450, 2.0, 66.7),
    ("random", 3, 63.0, 1125, 5.0, 67.4),
]


def test_lab_table1_reproduces_report_000(store):
    summary = summarize(SummaryRequest("lab", store["uri"]), client=store["client"])
    got = [
        (t.init, t.seed, t.best_valid, t.best_step, t.best_epoch, t.test_value)
        for t in summary.trials
    ]
    assert got == LAB_TABLE1
    assert all(t.group.startswith("fairseq/") and t.method == "full" for t in summary.trials)
    assert [t.wall_time for t in summary.trials] == [112.5] * 6  # last wall_time metric
    assert summary.not_counted == []
    assert summary.parent_run_id == store["lab"]["parent"]
    assert summary.sweep == "lab"


def test_lab_table2_is_the_correct_one_not_report_000s(store):
    summary = summarize(SummaryRequest("lab", store["uri"]), client=store["client"])
    pre, rnd = summary.groups
    assert (pre.group, pre.n, rnd.group, rnd.n) == (
        "fairseq/pretrained/full",
        3,
        "fairseq/random/full",
        3,
    )
    assert pre.mean == pytest.approx(79.5) and rnd.mean == pytest.approx(66.5)
    assert pre.std == pytest.approx(math.sqrt(0.76)) and rnd.std == pytest.approx(math.sqrt(1.03))
    assert pre.std == pytest.approx(0.8717797887)  # not report 000's 0.135
    assert (pre.min, pre.max, rnd.min, rnd.max) == (78.5, 80.1, 65.4, 67.4)
    assert pre.mean_best_step == pytest.approx(900) and rnd.mean_best_step == pytest.approx(825)
    assert pre.trainable_params == (22_830_594,)
    for group, values in ((pre, [79.9, 78.5, 80.1]), (rnd, [65.4, 66.7, 67.4])):
        low, high = scipy.stats.t.interval(
            0.95, len(values) - 1, loc=sum(values) / 3, scale=scipy.stats.sem(values)
        )
        assert (group.ci_low, group.ci_high) == (pytest.approx(low), pytest.approx(high))
        assert group.note == ""


def test_lab_comparison_is_paired_on_seed(store):
    summary = summarize(SummaryRequest("lab", store["uri"]), client=store["client"])
    (cmp,) = summary.comparisons  # one framework: no fairseq-vs-hf comparison
    assert (cmp.kind, cmp.within) == ("pretrained - random", "fairseq/full")
    assert cmp.diff == pytest.approx(13.0)
    assert (cmp.test, cmp.n_pairs, cmp.decision) == (
        "paired t",
        3,
        "fairseq/pretrained/full better",
    )
    ref = scipy.stats.ttest_rel([79.9, 78.5, 80.1], [65.4, 66.7, 67.4])  # seeds 1, 2, 3
    ci = ref.confidence_interval(0.95)
    assert cmp.p_value == pytest.approx(ref.pvalue)
    assert cmp.t == pytest.approx(ref.statistic)
    assert cmp.df == pytest.approx(ref.df)
    assert (cmp.ci_low, cmp.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high))


def test_paired_test_decides_where_welch_does_not(store):
    summary = summarize(SummaryRequest("paired", store["uri"]), client=store["client"])
    (cmp,) = summary.comparisons
    assert (cmp.axis, cmp.kind, cmp.test, cmp.n_pairs) == (
        "framework",
        "fairseq - hf",
        "paired t",
        5,
    )
    assert cmp.p_value == pytest.approx(scipy.stats.ttest_rel(PAIRED_BASE, PAIRED_HF).pvalue)
    assert cmp.p_holm < 0.05 and cmp.decision == "hf/pretrained/full better"
    welch = scipy.stats.ttest_ind(PAIRED_BASE, PAIRED_HF, equal_var=False)
    assert welch.pvalue > 0.5  # the same record, unpaired: nothing decided


def test_edge_selection_rules(store):
    summary = summarize(SummaryRequest("edge", store["uri"]), client=store["client"])
    got = [(t.group, t.seed, t.best_valid, t.best_step, t.test_value) for t in summary.trials]
    assert got == [
        ("hf/pretrained/full", 1, 85.0, 20, 70.0),  # tie 85 at 20 and 30: earliest step
        ("hf/pretrained/full", 2, 90.0, 30, 75.0),
        ("hf/pretrained/full", 3, 91.0, 20, 80.0),  # the earlier of the duplicates
        ("hf/random/full", 1, 65.0, 20, 55.0),  # re-logged step 20: latest values
    ]
    runs = store["edge"]["runs"]
    assert summary.trials[2].run_id == runs[2]
    reasons = {(n.seed, n.run_id): n.reason for n in summary.not_counted}
    assert reasons == {
        (3, runs[3]): f"duplicate: trial key dup-key is already counted with the "
        f"earlier-started run {runs[2]}",
        (4, runs[4]): "failed (MLflow status FAILED): RuntimeError: CUDA out of memory",
        (5, runs[5]): "not finished (MLflow status RUNNING, status tag running)",
        (6, runs[6]): "early-stopped by the scheduler",
        (8, runs[8]): "search-stage trial (the tables use the grid and confirm stages)",
        (7, runs[7]): "no test_accuracy at its best validation step 30",
    }
    assert "runs without a sweeper.role tag ignored (not sweeper runs): 1" in summary.notes
    # listed by group, then seed
    assert [n.seed for n in summary.not_counted] == [3, 4, 5, 6, 7, 8]


def test_edge_n1_group_and_comparison_are_undefined_not_nan(store):
    summary = summarize(SummaryRequest("edge", store["uri"]), client=store["client"])
    pre, rnd = summary.groups
    assert (pre.n, pre.mean, pre.std) == (3, pytest.approx(75.0), pytest.approx(5.0))
    half = scipy.stats.t.ppf(0.975, 2) * 5.0 / math.sqrt(3)
    assert (pre.ci_low, pre.ci_high) == (pytest.approx(75 - half), pytest.approx(75 + half))
    assert (rnd.n, rnd.mean, rnd.std, rnd.ci_low, rnd.ci_high) == (1, 55.0, None, None, None)
    assert rnd.note == "n = 1: std and CI undefined"
    (cmp,) = summary.comparisons
    assert (cmp.kind, cmp.within, cmp.diff) == (
        "pretrained - random",
        "hf/full",
        pytest.approx(20.0),
    )
    assert (cmp.ci_low, cmp.ci_high, cmp.t, cmp.p_value) == (None, None, None, None)
    assert cmp.note == (
        "n = 1 in a group: CI and p undefined; "
        "hf/pretrained/full: 1 failed, 1 early-stopped, 1 unfinished not counted"
    )
    assert pre.outcomes == {"failed": 1, "early_stopped": 1, "unfinished": 1}


@pytest.mark.parametrize("name", ["lab", "edge"])
def test_history_paths_agree(store, name):
    """Raw SQLite read, the SQL store's bulk API and per-run get_metric_history agree."""
    client = store["client"]
    fast = summarize(SummaryRequest(name, store["uri"]), client=client, history_path="sqlite")
    assert fast == summarize(SummaryRequest(name, store["uri"]), client=client, history_path="bulk")
    assert fast == summarize(
        SummaryRequest(name, store["uri"]), client=client, history_path="per_run"
    )
    assert fast == summarize(SummaryRequest(name, store["uri"]), client=client)


def test_bulk_path_opens_the_sql_store_without_private_client_attributes(store):
    """`bulk` must really be served by MLflow's SQL store (a silent fall-back to per_run
    would still agree above); other stores have no bulk path."""
    from sweeper.summarize.mlflow_reader import _bulk_store

    found = _bulk_store(store["uri"])
    assert found is not None and callable(found.get_metric_history_bulk)
    assert _bulk_store("http://127.0.0.1:9") is None


def test_sqlite_history_path_restores_nan_like_mlflow(store):
    from sweeper.summarize.mlflow_reader import load_histories

    client = store["client"]
    run_id = store["edge"]["runs"][1]
    by_path = {
        path: load_histories(client, [run_id], [record_names.METRIC_VALID_ACC], path)[run_id]
        for path in ("sqlite", "bulk", "per_run")
    }
    for history in by_path.values():
        points = history[record_names.METRIC_VALID_ACC]
        assert [p.step for p in points] == [10, 20, 30, 40, 50]
        assert math.isnan(points[-1].value)
    assert (
        by_path["sqlite"][record_names.METRIC_VALID_ACC][:4]
        == by_path["per_run"][record_names.METRIC_VALID_ACC][:4]
    )


def test_no_parent_run(store):
    summary = summarize(SummaryRequest("noparent", store["uri"]), client=store["client"])
    assert summary.parent_run_id is None
    assert "no parent run tagged sweeper.role=sweep" in summary.notes
    assert len(summary.trials) == 2


def test_several_sweeps_in_one_experiment_need_a_choice(store):
    with pytest.raises(SummarizeError, match=r"several sweeps \(a, b\).*--sweep"):
        summarize(SummaryRequest("twosweeps", store["uri"]), client=store["client"])
    summary = summarize(
        SummaryRequest("twosweeps", store["uri"], sweep="a"), client=store["client"]
    )
    assert [t.test_value for t in summary.trials] == [40.0]
    assert "runs of other sweeps in this experiment ignored: b" in summary.notes


def test_unknown_experiment_lists_the_known_ones(store):
    with pytest.raises(SummarizeError, match=r"no experiment named 'nope'.*'edge'.*'lab'"):
        summarize(SummaryRequest("nope", store["uri"]), client=store["client"])


# --- the CLI -----------------------------------------------------------------------------


def cli(*argv: str) -> int:
    return main(["summarize", *argv])


def test_cli_terminal_tables(store, capsys):
    assert cli("--experiment", "lab", "--tracking-uri", store["uri"], "--no-log") == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    row = next(
        line for line in lines if line.startswith("fairseq/pretrained/full") and "1125" in line
    )
    assert row.split()[:8] == [
        "fairseq/pretrained/full",
        "1",
        "fp32",
        "81.50",
        "1125",
        "5",
        "79.90",
        "112.5",
    ]
    t2 = next(line for line in lines if line.startswith("fairseq/random/full") and "66.50" in line)
    assert t2.split()[:4] == ["fairseq/random/full", "3", "66.50", "1.01"]
    assert "Std (ddof=1)" in out and "95% CI (t)" in out
    cmp = next(line for line in lines if line.startswith("init ") and "pretrained - random" in line)
    assert "+13.00" in cmp and "paired t" in cmp and "fairseq/pretrained/full better" in cmp
    assert "nan" not in out.lower()


def test_cli_edge_shows_na_and_not_counted(store, capsys):
    assert cli("--experiment", "edge", "--tracking-uri", store["uri"], "--no-log") == 0
    out = capsys.readouterr().out
    row = next(
        line for line in out.splitlines() if line.startswith("hf/random/full") and "n/a" in line
    )
    assert row.split()[:5] == ["hf/random/full", "1", "55.00", "n/a", "n/a"]
    assert "Not counted (6 runs)" in out
    assert "early-stopped by the scheduler" in out
    assert "nan" not in out.lower()


def test_cli_json_and_csv_and_markdown(store, capsys):
    assert (
        cli("--experiment", "edge", "--tracking-uri", store["uri"], "--format", "json", "--no-log")
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert [g["n"] for g in data["groups"]] == [3, 1]
    assert data["groups"][1]["std"] is None and data["comparisons"][0]["p_value"] is None
    assert len(data["not_counted"]) == 6 and len(data["trials"]) == 4
    assert "valid_curve" not in data["trials"][0]

    assert (
        cli("--experiment", "lab", "--tracking-uri", store["uri"], "--format", "csv", "--no-log")
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("# table1\nrun_id,run_name,trial_key,group,")
    assert "# table2\n" in out and "# comparisons\n" in out and "# not_counted\n" in out

    assert (
        cli(
            "--experiment",
            "lab",
            "--tracking-uri",
            store["uri"],
            "--format",
            "markdown",
            "--no-log",
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "| fairseq/pretrained/full | 3 | 79.50 | 0.87 |" in out


def test_cli_out_writes_files_and_logs_to_parent(store, tmp_path, capsys):
    out_dir = tmp_path / "report"
    assert cli("--experiment", "lab", "--tracking-uri", store["uri"], "--out", str(out_dir)) == 0
    err = capsys.readouterr().err
    assert f"report logged to parent run {store['lab']['parent']}" in err
    expected = {
        "summary.md",
        "summary.json",
        "summary.tex",
        "report.html",
        "curves.png",
        "test_accuracy.png",
        *(
            f"{t}.{s}"
            for t in ("table1", "table2", "comparisons", "not_counted")
            for s in ("md", "csv")
        ),
    }
    assert {p.name for p in out_dir.iterdir()} == expected
    assert json.loads((out_dir / "summary.json").read_text())["groups"][0]["mean"] == pytest.approx(
        79.5
    )
    assert (out_dir / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    client = store["client"]
    parent = store["lab"]["parent"]
    logged = {a.path for a in client.list_artifacts(parent, record_names.ARTIFACT_REPORT_DIR)}
    assert logged == {f"{record_names.ARTIFACT_REPORT_DIR}/{name}" for name in expected}
    metrics = client.get_run(parent).data.metrics
    assert metrics["summary/fairseq/pretrained/full/test_accuracy_mean"] == pytest.approx(79.5)
    assert metrics["summary/fairseq/random/full/test_accuracy_mean"] == pytest.approx(66.5)
    assert metrics["summary/fairseq/random/full/n"] == 3


def test_cli_without_parent_says_so(store, capsys):
    assert cli("--experiment", "noparent", "--tracking-uri", store["uri"]) == 0
    assert "no parent (sweep) run" in capsys.readouterr().err


def test_cli_spec_finds_store_experiment_and_sweep(store, tmp_path, capsys):
    spec = tmp_path / "lab.yaml"
    spec.write_text(
        "name: lab\n"
        f"output_dir: {store['root']}\n"  # the default store: output_dir/mlflow.db
        "data: {source: generated, dir: corpus, generate: {}}\n"
        "model:\n"
        "  arch: {layers: 1, embed_dim: 8, ffn_dim: 8, heads: 1, max_positions: 8}\n"
        "  sentencepiece: sp.model\n  dictionary: dict.txt\n  pretrain: {}\n"
    )
    assert cli(str(spec), "--format", "json", "--no-log") == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["experiment"], data["sweep"], len(data["trials"])) == ("lab", "lab", 6)
    assert data["tracking_uri"] == store["uri"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--experiment", "nope"], "no experiment named 'nope'"),
        (
            ["--experiment", "lab", "--tracking-uri", "sqlite:////nonexistent/dir/mlflow.db"],
            "no MLflow store at /nonexistent/dir/mlflow.db",
        ),
        (
            ["--experiment", "lab", "--tracking-uri", "http://127.0.0.1:9"],
            "cannot reach the tracking server at http://127.0.0.1:9",
        ),
        (["--experiment", "twosweeps"], "choose one with --sweep NAME"),
        ([], "give a SPEC, or --experiment NAME"),
        (["--experiment", "lab", "--tracking-uri", "NOT_A_DB"], "cannot open the MLflow store"),
    ],
)
def test_cli_bad_input_exits_2(store, capsys, argv, message):
    if "--tracking-uri" not in argv and argv:
        argv = [*argv, "--tracking-uri", store["uri"]]
    if "NOT_A_DB" in argv:
        bad = store["root"] / "not-a-db.db"
        bad.write_text("not a database\n")
        argv = [a.replace("NOT_A_DB", f"sqlite:///{bad}") for a in argv]
    with pytest.raises(SystemExit) as exc:
        cli(*argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_ensure_experiment_creates_once_with_the_artifact_root(store, tmp_path):
    from sweeper.tracking import ensure_experiment

    client = store["client"]
    first = ensure_experiment(client, "ensured", tmp_path / "mlartifacts")
    assert ensure_experiment(client, "ensured", tmp_path / "elsewhere") == first
    experiment = client.get_experiment(first)
    assert experiment.artifact_location == (tmp_path / "mlartifacts").resolve().as_uri()
    client.delete_experiment(first)
    with pytest.raises(ValueError, match="is deleted; restore it"):
        ensure_experiment(client, "ensured", None)


def test_a_spec_request_reads_the_spec_store(store, tmp_path):
    from sweeper.spec.load import validate_mapping

    raw = {
        "name": "lab",
        "output_dir": str(store["root"]),
        "data": {"source": "generated", "dir": "corpus", "generate": {}},
        "model": {
            "arch": {"layers": 1, "embed_dim": 8, "ffn_dim": 8, "heads": 1, "max_positions": 8},
            "sentencepiece": "sp.model",
            "dictionary": "dict.txt",
            "pretrain": {},
        },
    }
    spec = validate_mapping(raw, "lab.yaml", base_dir=tmp_path)
    summary = summarize(SummaryRequest.of_spec(spec), client=store["client"])
    assert (summary.experiment, summary.sweep, summary.tracking_uri) == ("lab", "lab", store["uri"])
    assert [t.test_value for t in summary.trials] == [79.9, 78.5, 80.1, 65.4, 66.7, 67.4]


def test_logging_the_report_marks_runs_without_best_checkpoint_metrics(store, tmp_path):
    """Runs an older sweeper made carry no best_* metrics; the report logs them, from
    Table 1's rows, once."""
    from sweeper.summarize.report import log_report, write_report

    client = store["client"]
    write_experiment(client, "unmarked", lab_trials())
    summary = summarize(SummaryRequest("unmarked", store["uri"]), client=client)
    assert len(summary.unmarked) == 6
    log_report(client, summary, write_report(summary, tmp_path / "report", figures=False))
    for trial in summary.trials:
        metrics = client.get_run(trial.run_id).data.metrics
        assert metrics[record_names.METRIC_BEST_TEST_ACC] == trial.test_value
        assert metrics[record_names.METRIC_BEST_VALID_ACC] == trial.best_valid
        assert metrics[record_names.METRIC_BEST_STEP] == trial.best_step
    again = summarize(SummaryRequest("unmarked", store["uri"]), client=client)
    assert again.unmarked == ()  # marked once, not on every summary
    parent = client.get_run(summary.parent_run_id).data.metrics
    group = summary.groups[0]
    assert parent[f"summary/{group.group}/test_accuracy_ci_low"] == group.ci_low


# --- the SQLite reader and the report digest ---------------------------------------------

EXPERIMENTS = ("lab", "edge", "paired", "noparent")


def _comparable(records) -> list:
    """RunRecords with NaN made comparable (NaN != NaN would fail any equality)."""
    return [
        (replace(r, latest={}), {k: "nan" if math.isnan(v) else v for k, v in r.latest.items()})
        for r in records
    ]


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_sqlite_reader_gives_mlflows_records_and_summary(store, name):
    """Reading the file with SQL (no client given) and through MLflow's client agree on
    every run record (tags, params, latest metrics, order) and so on the summary."""
    from sweeper.summarize.source import MlflowSource, StoreSource, open_source
    from sweeper.summarize.sqlite_store import SqliteStore

    fast = open_source(store["uri"])
    assert isinstance(fast, StoreSource) and isinstance(fast.store, SqliteStore)
    slow = MlflowSource(store["client"])
    experiment_id, _ = slow.experiment(name)
    assert fast.experiment(name) == slow.experiment(name)
    assert _comparable(fast.runs(experiment_id)) == _comparable(slow.runs(experiment_id))
    parent = store[name]["parent"]
    if parent:
        assert fast.tags(parent) == slow.tags(parent)
    assert summarize(SummaryRequest(name, store["uri"])) == summarize(
        SummaryRequest(name, store["uri"]), client=store["client"]
    )


def test_sqlite_reader_names_the_known_experiments(store):
    with pytest.raises(SummarizeError, match=r"no experiment named 'nope'.*'edge'.*'lab'"):
        summarize(SummaryRequest("nope", store["uri"]))


def test_an_unchanged_report_is_not_logged_again_and_mlflow_is_not_imported(store, tmp_path):
    """The first summary logs the report and its digest; the next one, with nothing
    changed, reads the store with SQL only (mlflow never imported) and logs nothing;
    a new run changes the report, which is logged again."""
    import subprocess
    import sys

    client = store["client"]
    made = write_experiment(client, "digest", lab_trials())
    code = (
        "import sys\n"
        "from sweeper.cli.main import main\n"
        f"status = main(['summarize', '--experiment', 'digest', '--tracking-uri', {store['uri']!r},"
        " '--format', 'json'])\n"
        "print('mlflow imported:', 'mlflow' in sys.modules, file=sys.stderr)\n"
        "sys.exit(status)\n"
    )

    def summarise() -> str:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        json.loads(done.stdout)
        return done.stderr

    first = summarise()
    assert f"report logged to parent run {made['parent']}" in first
    tags = client.get_run(made["parent"]).data.tags
    assert len(tags[record_names.TAG_REPORT_DIGEST]) == 64
    logged_points = len(
        client.get_metric_history(made["parent"], "summary/fairseq/random/full/test_accuracy_mean")
    )

    second = summarise()
    assert f"report unchanged since it was logged to parent run {made['parent']}" in second
    assert "mlflow imported: False" in second
    assert (
        len(
            client.get_metric_history(
                made["parent"], "summary/fairseq/random/full/test_accuracy_mean"
            )
        )
        == logged_points
    )

    extra = Trial("fairseq", "random", 4, [(225, 60.0)], [(225, 61.0)])
    write_trial(client, made["experiment_id"], made["parent"], extra, order=50)
    third = summarise()
    assert f"report logged to parent run {made['parent']}" in third
    assert (
        client.get_run(made["parent"]).data.tags[record_names.TAG_REPORT_DIGEST]
        != (tags[record_names.TAG_REPORT_DIGEST])
    )


def test_a_report_logged_without_figures_is_logged_again_with_them(store, tmp_path, capsys):
    """`sweeper run` logs its closing report without figures (unless --figures); the
    digest says so, so the next `sweeper summarize` logs the whole report, figures
    included, and only the one after that finds it unchanged."""
    from sweeper.summarize import log_report, write_report

    client = store["client"]
    made = write_experiment(client, "figless", lab_trials())
    summary = summarize(SummaryRequest("figless", store["uri"]), client=client)
    files = write_report(summary, tmp_path / "run", figures=False)
    assert not [f for f in files if f.suffix == ".png"]
    log_report(client, summary, files, figures=False)
    argv = ["summarize", "--experiment", "figless", "--tracking-uri", store["uri"]]

    assert main([*argv, "--format", "json"]) == 0
    assert f"report logged to parent run {made['parent']}" in capsys.readouterr().err
    logged = client.list_artifacts(made["parent"], record_names.ARTIFACT_REPORT_DIR)
    assert {"curves.png", "test_accuracy.png"} <= {a.path.split("/")[-1] for a in logged}
    assert main([*argv, "--format", "json"]) == 0
    assert "report unchanged since it was logged" in capsys.readouterr().err


# --- best checkpoints from the runs' own best-checkpoint metrics -------------------------


def test_best_checkpoint_metrics_give_what_the_histories_give(store, tmp_path):
    """Runs that carry best_* metrics (here logged by the report, from the histories, as
    a finished trial logs them itself) are summarised from them, histories unread, to
    the same summary; the figures' curves are read when drawn. A record changed by hand
    shows which path a summary took: `recompute` reads every history."""
    from mlflow.entities import Metric

    from sweeper.summarize.core import with_curves
    from sweeper.summarize.report import log_report, write_report

    client = store["client"]
    write_experiment(client, "marked", [*lab_trials(), *edge_trials()])
    first = summarize(SummaryRequest("marked", store["uri"]), client=client)
    assert first.unmarked  # nothing carries best_* yet: every trial read its histories
    log_report(client, first, write_report(first, tmp_path / "report", figures=False))
    truth = summarize(SummaryRequest("marked", store["uri"], recompute=True))
    assert all(t.valid_curve for t in truth.trials)
    assert truth.trials == first.trials and truth.unmarked == ()
    recorded = summarize(SummaryRequest("marked", store["uri"]))
    assert all(not t.valid_curve for t in recorded.trials)
    assert with_curves(recorded) == with_curves(recorded, client) == truth
    assert summarize(SummaryRequest("marked", store["uri"]), client=client) == recorded
    files = write_report(with_curves(recorded), tmp_path / "again")
    assert "curves.png" in {p.name for p in files}
    assert (tmp_path / "again" / "summary.json").read_text() == (
        tmp_path / "report" / "summary.json"
    ).read_text()

    one, later = truth.trials[0], int(time.time() * 1000) + 1000  # after the report's
    client.log_batch(one.run_id, metrics=[Metric("best_test_accuracy", 12.5, later, one.best_step)])
    changed = summarize(SummaryRequest("marked", store["uri"]))
    assert next(t for t in changed.trials if t.run_id == one.run_id).test_value == 12.5
    assert summarize(SummaryRequest("marked", store["uri"], recompute=True)) == truth
    # Another selection than the records were logged under reads the histories.
    by_loss = summarize(SummaryRequest("marked", store["uri"], metric="loss"))
    assert by_loss == summarize(
        SummaryRequest("marked", store["uri"], metric="loss", recompute=True)
    )
    assert by_loss.trials != truth.trials

    # A record that does not give the point whole (a value not finite) falls back.
    nan = Metric("best_test_accuracy", float("nan"), later + 1, one.best_step)
    client.log_batch(one.run_id, metrics=[nan])
    fallback = summarize(SummaryRequest("marked", store["uri"]))
    got = next(t for t in fallback.trials if t.run_id == one.run_id)
    assert got == one  # its histories read: curve included
    assert with_curves(fallback).trials == truth.trials


def test_a_sqlite_file_that_fails_its_sql_read_is_read_through_mlflow(store, monkeypatch):
    """A locked or damaged file (the SQL read raises) is read again with MLflow's client:
    the summary, and the curves read for figures, are the same."""
    from sweeper.summarize.core import with_curves
    from sweeper.summarize.source import SqliteReadFailed, StoreSource

    expected = with_curves(summarize(SummaryRequest("lab", store["uri"])))

    def locked(*_: object) -> None:
        raise SqliteReadFailed("database is locked")

    monkeypatch.setattr(StoreSource, "_read", locked)
    assert with_curves(summarize(SummaryRequest("lab", store["uri"]))) == expected
    bare = replace(expected, trials=[replace(t, valid_curve=()) for t in expected.trials])
    assert with_curves(bare) == expected
