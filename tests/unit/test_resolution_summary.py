"""What the test set can resolve, through the whole summary: a real MLflow SQLite store
whose trial runs hold `predictions/test.json` artifacts and the `sweeper.predictions`
tag, read by `sweeper summarize` (the CLI) in JSON, markdown, LaTeX and HTML, with and
without `--population`, and logged to the parent run; a store without predictions
reports as before; blocks that vary different seed sources are not compared."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sweeper import record_names as rn
from sweeper.cli.main import main
from sweeper.summarize.mlflow_reader import PARENT_RUN_TAG
from sweeper.trainers import predictions as files
from sweeper.trainers.metrics import accuracy_percent
from sweeper.trainers.predictions import CheckpointPredictions, SplitPredictions

EXAMPLES = 189
SEEDS = (1, 2, 3)
EXPERIMENT = "tset"
FRAMEWORK_WORDS = "with 189 test examples, no number of seeds decides a difference below ±"


def _correct(rng: np.random.Generator, ease: np.ndarray, tilt: np.ndarray) -> list[int]:
    from scipy.special import ndtr

    luck = 0.1 * rng.standard_normal()
    return [int(x) for x in rng.random(EXAMPLES) < ndtr(ease + tilt + luck)]


def _outcomes(variant: str = "") -> dict[tuple[str, int], list[int]]:
    """Pretrained trials right on about 74% of the examples, random ones on about 50%;
    fairseq and hf equally good overall but each better on its own examples. The
    fairseq - hf pretrained difference is made exactly 0 (hf's seeds are fairseq's with
    a discordant example each way moved), so it lies below any resolution."""
    rng = np.random.default_rng(11)
    ease = rng.normal(1.73, 2.5, EXAMPLES)
    hard = rng.normal(0.0, 2.5, EXAMPLES)
    tilt = rng.normal(0.0, 0.25, EXAMPLES)
    out = {}
    for seed in SEEDS:
        fp = _correct(rng, ease, tilt)
        hp = list(fp)
        right, wrong = [i for i, x in enumerate(fp) if x], [i for i, x in enumerate(fp) if not x]
        for i, j in zip(right[seed::17], wrong[seed::11], strict=False):  # swap, same count
            hp[i], hp[j] = 0, 1
        out[(f"fairseq/pretrained/full{variant}", seed)] = fp
        out[(f"hf/pretrained/full{variant}", seed)] = hp
        out[(f"fairseq/random/full{variant}", seed)] = _correct(rng, hard, tilt)
        out[(f"hf/random/full{variant}", seed)] = _correct(rng, hard, -tilt)
    return out


def _store(tmp_path: Path, predictions: bool = True, variants: tuple[str, ...] = ("",)) -> str:
    """A sweep run and its trial runs (best-checkpoint metrics, predictions artifacts)."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment(EXPERIMENT, artifact_location=(tmp_path / "a").as_uri())
    tags = {rn.TAG_ROLE: rn.ROLE_SWEEP, rn.TAG_SWEEP: EXPERIMENT}
    parent = client.create_run(experiment, tags=tags).info.run_id
    client.set_terminated(parent)
    for variant in variants:
        for (group, seed), correct in _outcomes(variant).items():
            framework, init, method = group.split("[")[0].split("/")
            tags = {
                rn.TAG_ROLE: rn.ROLE_TRIAL, rn.TAG_SWEEP: EXPERIMENT, PARENT_RUN_TAG: parent,
                rn.TAG_GROUP: group, rn.TAG_SEED: str(seed), rn.TAG_FRAMEWORK: framework,
                rn.TAG_INIT: init, rn.TAG_METHOD: method, rn.TAG_TRIAL_KEY: f"{group}-{seed}",
                rn.TAG_STATUS: "finished",
                **({rn.TAG_PREDICTIONS: "test"} if predictions else {}),
            }  # fmt: skip
            run = client.create_run(experiment, tags=tags, run_name=f"{group}-s{seed}")
            run_id = run.info.run_id
            test = accuracy_percent(sum(correct), EXAMPLES)
            for name, value in (
                (rn.METRIC_BEST_VALID_ACC, test + 1.0),
                (rn.METRIC_BEST_TEST_ACC, test),
                (rn.METRIC_BEST_STEP, 300.0),
                (rn.METRIC_BEST_EPOCH, 3.0),
            ):
                client.log_metric(run_id, name, value, step=300)
            for step in (100, 200, 300):  # the curve the figures draw; best at the last
                client.log_metric(run_id, rn.METRIC_VALID_ACC, test + step / 300, step=step)
                client.log_metric(run_id, rn.METRIC_TEST_ACC, test, step=step)
            if predictions:
                best = CheckpointPredictions(300, tuple(correct), (0.9,) * EXAMPLES, tuple(correct))
                split = SplitPredictions(
                    "test", "classification", tuple(range(EXAMPLES)), {"best": best, "last": best}
                )
                path = files.write(tmp_path / "trials" / run_id, split)
                client.log_artifact(run_id, str(path), rn.ARTIFACT_PREDICTIONS_DIR)
            client.set_terminated(run_id)
    return uri


def _summarize(capsys, uri: str, *extra: str) -> str:
    code = main(["summarize", "--experiment", EXPERIMENT, "--tracking-uri", uri, *extra])
    out = capsys.readouterr().out
    assert code == 0
    return out


def _by_kind(comparisons: list[dict]) -> dict[tuple[str, str], dict]:
    return {(c["kind"], c["within"]): c for c in comparisons}


def test_every_comparison_says_what_the_test_set_can_resolve(tmp_path, capsys):
    uri = _store(tmp_path)
    summary = json.loads(_summarize(capsys, uri, "--format", "json", "--no-log"))
    found = _by_kind(summary["comparisons"])
    framework = found[("fairseq - hf", "pretrained/full")]
    init = found[("pretrained - random", "fairseq/full")]
    assert "population" not in summary
    for c in (framework, init):
        stats = c["test_set"]
        assert stats["examples"] == EXAMPLES and len(stats["discordant"]) == 3
        assert stats["low"] < c["diff"] < stats["high"]
        assert stats["combined_low"] < c["diff"] < stats["combined_high"]
        assert 0.0 < stats["p_mcnemar"] <= 1.0 and not stats["decides"]
        assert stats["resolution"] > 0.0 and stats["resolution_level"] == c["decision_level"]
    assert framework["diff"] == 0.0 and framework["test_set"]["below_resolution"]
    x = framework["test_set"]["resolution"]
    assert f"{FRAMEWORK_WORDS}{x:.2f} points" in framework["note"]
    assert framework["seeds_needed"] is None
    assert framework["test_set"]["withheld"] == "below the test set's resolution"
    assert not init["test_set"]["below_resolution"] and FRAMEWORK_WORDS not in init["note"]
    assert init["decision"] == "fairseq/pretrained/full better"
    assert init["test_set"]["p_mcnemar"] < 1e-6  # 24 points on 189 examples x 3 seeds

    markdown = _summarize(capsys, uri, "--format", "markdown", "--no-log")
    for header in ("Test set (95%, examples)", "p (McNemar, exact)", "Seeds x examples (95%)"):
        assert header in markdown
    assert "n/a (below the test set's resolution)" in markdown
    results = markdown.split("## Results")[1].split("##")[0]
    assert f"{FRAMEWORK_WORDS}{x:.2f} points" in results
    assert "this test set's sampling: 95% interval" in results


def test_population_decides_by_the_seeds_x_examples_interval(tmp_path, capsys):
    from scipy import stats as scipy_stats

    uri = _store(tmp_path)
    plain = _by_kind(
        json.loads(_summarize(capsys, uri, "--format", "json", "--no-log"))["comparisons"]
    )
    summary = json.loads(_summarize(capsys, uri, "--format", "json", "--no-log", "--population"))
    assert summary["population"] is True
    for key, c in _by_kind(summary["comparisons"]).items():
        stats = c["test_set"]
        assert stats["decides"] and c["rule"] == "Holm"
        variance = stats["seed_variance"] + stats["example_variance"]
        half = scipy_stats.t.ppf(1 - (1 - c["decision_level"]) / 2, stats["df"]) * variance**0.5
        assert c["decision_low"] == pytest.approx(max(-100.0, c["diff"] - half))
        assert c["decision_high"] == pytest.approx(min(100.0, c["diff"] + half))
        assert plain[key]["p_value"] == c["p_value"]  # the seeds' own t-test, shown as before
        wider = c["decision_high"] - c["decision_low"]
        assert wider >= 0.0
    framework = _by_kind(summary["comparisons"])[("fairseq - hf", "pretrained/full")]
    assert framework["seeds_needed"] is None and framework["decision"] == "undecided"
    markdown = _summarize(capsys, uri, "--format", "markdown", "--no-log", "--population")
    assert "(--population: the seeds x examples p and interval" in markdown
    assert "seeds x examples t 95% CI" in markdown


def test_every_report_format_and_the_parent_run_carry_it(tmp_path, capsys):
    from mlflow import MlflowClient

    uri = _store(tmp_path)
    out = tmp_path / "report"
    _summarize(capsys, uri, "--out", str(out))
    words = FRAMEWORK_WORDS
    assert words in (out / "summary.md").read_text()
    assert words in (out / "report.html").read_text()
    assert words.replace("±", r"$\pm$") in (out / "summary.tex").read_text()
    import csv

    rows = list(csv.DictReader((out / "comparisons.csv").open(encoding="utf-8")))
    stats = [json.loads(row["test_set"]) for row in rows]  # full precision, one JSON cell
    assert all(s["examples"] == EXAMPLES and s["resolution"] > 0 for s in stats)
    client = MlflowClient(uri)
    (parent,) = [
        r for r in client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
        if r.data.tags.get(rn.TAG_ROLE) == rn.ROLE_SWEEP
    ]  # fmt: skip
    metrics = parent.data.metrics
    base = "summary/compare/fairseq - hf/pretrained/full"
    assert metrics[f"{base}/below_resolution"] == 1.0
    assert metrics[f"{base}/resolution"] > 0.0
    assert {f"{base}/{k}" for k in ("test_set_low", "p_mcnemar", "seeds_x_examples_high")} <= set(
        metrics
    )


def test_a_store_without_predictions_reports_as_before(tmp_path, capsys):
    uri = _store(tmp_path, predictions=False)
    text = _summarize(capsys, uri, "--format", "json", "--no-log")
    summary = json.loads(text)
    assert all("test_set" not in c for c in summary["comparisons"])
    assert "population" not in summary
    markdown = _summarize(capsys, uri, "--format", "markdown", "--no-log")
    assert "Test set (95%, examples)" not in markdown and "no number of seeds" not in markdown
    population = json.loads(_summarize(capsys, uri, "--format", "json", "--no-log", "--population"))
    for before, after in zip(summary["comparisons"], population["comparisons"], strict=True):
        assert after["decision"] == before["decision"]
        assert "decided by the seeds alone (no test predictions)" in after["note"]


def test_blocks_that_vary_different_seed_sources_are_not_compared(tmp_path, capsys):
    variants = ("[seed_source=init]", "[seed_source=data_order]")
    uri = _store(tmp_path, variants=variants)
    summary = json.loads(_summarize(capsys, uri, "--format", "json", "--no-log"))
    pairs = {(c["group_a"], c["group_b"]) for c in summary["comparisons"]}
    assert len(pairs) == 2 * 4  # per block: 2 framework and 2 init comparisons
    for a, b in pairs:
        assert a.split("[")[1] == b.split("[")[1]  # never across blocks
    assert {c["axis"] for c in summary["comparisons"]} == {"framework", "init"}


def test_population_with_a_margin_decides_by_the_bonferroni_seeds_x_examples_interval(
    tmp_path, capsys
):
    from scipy import stats as scipy_stats

    uri = _store(tmp_path)
    args = ("--format", "json", "--no-log", "--population", "--margin", "3")
    summary = json.loads(_summarize(capsys, uri, *args))
    for c in summary["comparisons"]:
        assert c["rule"] == "interval" and c["test_set"]["decides"]
        assert c["decision_level"] == pytest.approx(1 - 0.05 / 4)
        stats = c["test_set"]
        variance = stats["seed_variance"] + stats["example_variance"]
        half = scipy_stats.t.ppf(1 - 0.05 / 8, stats["df"]) * variance**0.5
        assert c["decision_high"] - c["decision_low"] == pytest.approx(2 * half)
    terminal = _summarize(capsys, uri, "--no-log", "--population", "--margin", "3")
    assert "Bonferroni 98.75% seeds x examples t interval" in terminal
    assert "Seeds x examples (95%)" in terminal


def test_population_refuses_a_sweep_whose_seeds_were_added_until_decided(tmp_path, capsys):
    from mlflow import MlflowClient

    from sweeper.summarize.records import SequentialPlan

    uri = _store(tmp_path)
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(EXPERIMENT).experiment_id
    (parent,) = [
        r for r in client.search_runs([experiment]) if r.data.tags.get(rn.TAG_ROLE) == rn.ROLE_SWEEP
    ]
    plan = SequentialPlan(start=3, batch=3, max_seeds=9, alpha=0.05)
    client.set_tag(parent.info.run_id, rn.TAG_SEQUENTIAL_PLAN, json.dumps(plan.to_dict()))
    with pytest.raises(SystemExit) as exit_info:
        main(["summarize", "--experiment", EXPERIMENT, "--tracking-uri", uri, "--population"])
    assert exit_info.value.code == 2
    assert "--population decides comparisons of seeds fixed in advance" in capsys.readouterr().err
    text = _summarize(capsys, uri, "--format", "json", "--no-log")  # without it: the plan's rule
    comparisons = json.loads(text)["comparisons"]
    assert {c["rule"] for c in comparisons} <= {"group-sequential", "anytime-valid"}
    framework = _by_kind(comparisons)[("fairseq - hf", "pretrained/full")]
    assert framework["test_set"]["below_resolution"] and FRAMEWORK_WORDS in framework["note"]
    assert framework["test_set"]["resolution_level"] == pytest.approx(1 - 0.05 / 4)
