"""The variance table through `sweeper summarize`, from a real MLflow SQLite store.

The store holds one sweep written through MlflowClient as the engine writes one: a
parent run, and trial runs with the seed-source tags (`sweeper.seed_source`,
`sweeper.seed.<source>`), their group names (`...[seed_source=init]`), step metrics,
and each trial's test predictions uploaded as `predictions/test.json` with the
`sweeper.predictions` tag. Every trial's test accuracy is what its predictions count
at the best-validation step, as the trainers record it.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from sweeper import record_names
from sweeper.cli.main import main
from sweeper.summarize.variance import bootstrap_variance
from sweeper.trainers import predictions as files
from sweeper.trainers.metrics import accuracy_percent
from sweeper.trainers.predictions import CheckpointPredictions, SplitPredictions

pytestmark = pytest.mark.integration

EXAMPLES = 189
BEST, LAST = 20, 30
SEEDS = (1, 2, 3, 4)
SOURCES = ("all", "init", "data_order", "dropout")
T0 = 1_700_000_000_000


def _write_trial(client, experiment_id, parent_id, root: Path, framework, source, seed, rng):
    """One finished trial run of `framework`/pretrained/full varying `source` (seed
    `seed`, the other sources held at 1), its predictions uploaded; returns its run id
    and its reported checkpoint's correct flags."""
    from mlflow.entities import Metric
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    base = f"{framework}/pretrained/full"
    group = base if source == "all" else f"{base}[seed_source={source}]"
    seeds = {s: (seed if s == source else 1) for s in record_names.SEED_SOURCES}
    tags = {
        MLFLOW_PARENT_RUN_ID: parent_id,
        record_names.TAG_ROLE: record_names.ROLE_TRIAL,
        record_names.TAG_SWEEP: "variance",
        record_names.TAG_TRIAL_KEY: f"{group}-s{seed}",
        record_names.TAG_GROUP: group,
        record_names.TAG_SEED: str(seed),
        record_names.TAG_INIT: "pretrained",
        record_names.TAG_FRAMEWORK: framework,
        record_names.TAG_METHOD: "full",
        record_names.TAG_STATUS: record_names.Status.FINISHED,
        record_names.TAG_STAGE: "grid",
        record_names.TAG_PREDICTIONS: "valid,test",
    }
    if source != "all":
        tags[record_names.TAG_SEED_SOURCE] = source
        tags.update({record_names.TAG_SEED_OF[s]: str(v) for s, v in seeds.items()})
    run = client.create_run(experiment_id, start_time=T0, tags=tags, run_name=f"{group}-s{seed}")
    run_id = run.info.run_id
    level = {"all": 0.74, "init": 0.73, "data_order": 0.75, "dropout": 0.74}[source]
    best = (rng.random(EXAMPLES) < level + rng.normal(0, 0.02)).astype(int)
    last = (rng.random(EXAMPLES) < 0.6).astype(int)
    metrics = []
    for step, valid, correct in ((10, 50.0, last), (BEST, 80.0, best), (LAST, 70.0, last)):
        test = accuracy_percent(int(correct.sum()), EXAMPLES)
        metrics += [
            Metric(record_names.METRIC_VALID_ACC, valid, T0, step),
            Metric(record_names.METRIC_TEST_ACC, test, T0, step),
            Metric(record_names.METRIC_EPOCH, step / 10, T0, step),
        ]
    client.log_batch(run_id, metrics=metrics)
    split = SplitPredictions(
        "test",
        "classification",
        tuple(range(EXAMPLES)),
        {
            which: CheckpointPredictions(step, flags, (0.9,) * EXAMPLES, flags)
            for which, step, flags in (("best", BEST, _flags(best)), ("last", LAST, _flags(last)))
        },
    )
    path = files.write(root / run_id, split)
    client.log_artifact(run_id, str(path), record_names.ARTIFACT_PREDICTIONS_DIR)
    client.set_terminated(run_id, "FINISHED", end_time=T0 + 1000)
    return run_id, _flags(best)


def _flags(correct: np.ndarray) -> tuple[int, ...]:
    return tuple(int(x) for x in correct)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from mlflow import MlflowClient

    root = tmp_path_factory.mktemp("variance")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment_id = client.create_experiment(
        "variance", artifact_location=(root / "artifacts").as_uri()
    )
    parent = client.create_run(
        experiment_id, start_time=T0, tags={record_names.TAG_ROLE: record_names.ROLE_SWEEP}
    ).info.run_id
    rng = np.random.default_rng(39)
    written = {}
    for framework in ("fairseq", "hf"):
        for source in SOURCES:
            for seed in SEEDS:
                run_id, flags = _write_trial(
                    client, experiment_id, parent, root / "files", framework, source, seed, rng
                )
                written[run_id] = (framework, source, flags)
    client.set_terminated(parent, "FINISHED")
    return {"uri": uri, "client": client, "parent": parent, "written": written}


def _summarize(store, *extra: str) -> int:
    return main(["summarize", "--experiment", "variance", "--tracking-uri", store["uri"], *extra])


def test_json_holds_each_sources_variance_and_the_test_sets(store, capsys):
    assert _summarize(store, "--format", "json", "--no-log") == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["variance"]["rows"]
    assert [(r["group"], r["source"]) for r in rows] == [
        (f"{fw}/pretrained/full", source)
        for fw in ("fairseq", "hf")
        for source in (*SOURCES, "test_set")
    ]
    values: dict[tuple[str, str], list[float]] = {}
    flags: dict[str, list[tuple[int, ...]]] = {}
    for fw, source, f in store["written"].values():
        values.setdefault((fw, source), []).append(accuracy_percent(sum(f), EXAMPLES))
        flags.setdefault(fw, []).append(f)
    for t in data["trials"]:  # each reported value is what its best predictions count
        assert t["test_accuracy"] == accuracy_percent(
            sum(store["written"][t["run_id"]][2]), EXAMPLES
        )
    for row in rows:
        fw = row["group"].split("/")[0]
        if row["source"] == "test_set":
            assert row["n"] == len(SEEDS) * len(SOURCES) and row["examples"] == EXAMPLES
            expected = statistics.mean(bootstrap_variance(f) for f in flags[fw])
            assert row["variance"] == pytest.approx(expected, rel=1e-12)
            closed = statistics.mean(
                1e4 * (p := sum(f) / EXAMPLES) * (1 - p) / EXAMPLES for f in flags[fw]
            )
            assert row["variance"] == pytest.approx(closed, rel=0.03)  # MC error ~0.4% here
            test_variance = row["variance"]
            continue
        vs = values[(fw, row["source"])]
        assert row["n"] == len(SEEDS)
        assert row["std"] == pytest.approx(statistics.stdev(vs))
        assert row["variance_low"] < row["variance"] < row["variance_high"]
        assert row["held"] == (
            {} if row["source"] == "all" else {
                s: [1] for s in record_names.SEED_SOURCES if s != row["source"]
            }
        )  # fmt: skip
    for row in rows:
        if row["source"] != "test_set":
            test_row = next(
                r for r in rows if r["group"] == row["group"] and r["source"] == "test_set"
            )
            assert row["ratio"] == pytest.approx(row["variance"] / test_row["variance"])
    assert test_variance > 0
    assert data["variance"]["interval"].startswith("95% chi-square")


def test_terminal_and_markdown_print_the_table(store, capsys):
    assert _summarize(store, "--no-log") == 0
    out = capsys.readouterr().out
    assert "Variance. Where the seed-to-seed variance of test accuracy comes from" in out
    line = next(
        x for x in out.splitlines() if x.startswith("hf/pretrained/full") and "dropout seed" in x
    )
    assert "init=1, data_order=1" in line
    assert f"test set ({EXAMPLES} examples)" in out
    assert "a new test set of 189 examples would move it by" in out  # the results paragraph
    assert _summarize(store, "--format", "markdown", "--no-log") == 0
    markdown = capsys.readouterr().out
    assert "## Variance. Where" in markdown
    assert "| fairseq/pretrained/full | test set (189 examples) |  | 16 |" in markdown


def test_out_writes_the_figure_and_logging_records_it(store, tmp_path, capsys):
    out_dir = tmp_path / "report"
    assert _summarize(store, "--out", str(out_dir)) == 0
    capsys.readouterr()
    assert (out_dir / "variance.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out_dir / "variance.csv").read_text().startswith("group,source,n,mean,std,")
    assert "Variance" in (out_dir / "summary.tex").read_text()
    client, parent = store["client"], store["parent"]
    logged = {a.path for a in client.list_artifacts(parent, record_names.ARTIFACT_REPORT_DIR)}
    report = record_names.ARTIFACT_REPORT_DIR
    assert {f"{report}/variance.png", f"{report}/variance.csv", f"{report}/variance.md"} <= logged
    metrics = client.get_run(parent).data.metrics
    summary = json.loads((out_dir / "summary.json").read_text())
    for row in summary["variance"]["rows"]:
        key = f"summary/{row['group']}/variance/{row['source']}/std"
        assert metrics[key] == pytest.approx(row["std"])
        assert math.isfinite(metrics[key.replace("/std", "/variance")])
