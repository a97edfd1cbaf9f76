"""Sweeper's commands keep the terminal for their own lines: third-party logging goes to
a log file named in one line, and `-v` brings it back.

A real trainer on the tiny shared store: `sweeper trial` runs one fairseq trial (random
init: no pretraining stage), its run is written to MLflow as the engine writes it
(tags, step metrics, trial.json and the best checkpoint), and `sweeper summarize
--evaluate` reloads the checkpoint with fairseq's hub interface in its own process,
where fairseq's INFO lines (its whole model configuration per reload) would otherwise
reach the terminal. fairseq alone: it is the framework that logs at INFO; one trial
keeps the module within a minute.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_summarize_store import Trial, write_experiment

from sweeper import record_names
from sweeper.trainers.base import TrialJob
from sweeper.trainers.registry import get_trainer
from tests.support.processes import clean_env, sweeper_command
from tests.support.sweeps import new_sweep

pytestmark = pytest.mark.integration

LOG_LINE = "third-party log: "


def _sweeper(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        sweeper_command(*args),
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=300,
        cwd=cwd,
    )


def _lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return (done.stdout + done.stderr).splitlines()


def _record(trial_out: Path, framework: str) -> Trial:
    events = [json.loads(line) for line in (trial_out / "events.jsonl").read_text().splitlines()]
    points = {
        split: [(e["step"], e["accuracy"]) for e in events if e["split"] == split]
        for split in ("valid", "test")
    }
    return Trial(framework, "random", 1, valid=points["valid"], test=points["test"])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """(spec, the `sweeper trial` results by framework), each trial recorded in the
    spec's store as `sweeper run` records it, the runs' artifacts in the spec's
    folder's mlruns/."""
    pytest.importorskip("fairseq")
    from mlflow import MlflowClient

    tmp = tmp_path_factory.mktemp("quiet")
    spec, out = new_sweep(tmp, tmp_path_factory, "quiet", train={"epochs": 1})
    trials = {}
    for framework in ("fairseq",):
        trials[framework] = _sweeper(
            "trial", spec, "--init", "random", "--framework", framework,
            "--out", tmp / framework,
        )  # fmt: skip
        assert trials[framework].returncode == 0, trials[framework].stderr[-3000:]
    records = [_record(tmp / f, f) for f in trials]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp)  # the store's default artifact root is ./mlruns, made absolute
        client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
        made = write_experiment(client, "quiet", records)
        for framework, run_id in zip(trials, made["runs"], strict=True):
            folder = tmp / framework
            client.log_artifact(run_id, str(folder / record_names.TRIAL_CONFIG_FILE))
            job = TrialJob.load(folder / record_names.TRIAL_CONFIG_FILE)
            best = get_trainer(framework).checkpoints(job).best
            assert best is not None and best.exists(), folder
            if best.is_dir():
                client.log_artifacts(run_id, str(best), record_names.ARTIFACT_BEST_CHECKPOINT)
            else:
                client.log_artifact(run_id, str(best), record_names.ARTIFACT_BEST_CHECKPOINT)
    return spec, trials


def test_trial_prints_its_own_lines_only(store):
    _, trials = store
    for framework, done in trials.items():
        lines = _lines(done)
        assert not [line for line in lines if " INFO " in line or "Warning" in line], lines
        assert lines[0].startswith(f"trial {framework}-random-full-s1 ")
        assert lines[-1].startswith("best checkpoint: ")


def test_summarize_evaluate_prints_the_summary_one_line_per_trial_and_the_log_line(store):
    spec, _ = store
    plain = _sweeper("summarize", spec, "--no-log", cwd=spec.parent)
    assert plain.returncode == 0, plain.stderr[-3000:]
    checked = _sweeper("summarize", spec, "--no-log", "--evaluate", cwd=spec.parent)
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    lines = _lines(checked)
    trials = 1
    assert len(lines) <= len(_lines(plain)) + trials + 1, "\n".join(lines)
    assert lines[: len(_lines(plain))] == _lines(plain)  # the report, then the new lines
    # written by hand without its predictions: checked by its accuracy alone
    expected = "evaluate 1/1 fairseq-random-s1: ok (no stored predictions) (1 of 1 agree, exactly)"
    assert lines[-2] == expected
    assert lines[-1].startswith(LOG_LINE)
    log = Path(lines[-1][len(LOG_LINE) :])
    log = log if log.is_absolute() else spec.parent / log
    assert log == spec.parent / "out" / "logs" / "sweeper-summarize.log"
    text = log.read_text(encoding="utf-8")
    assert " INFO fairseq." in text  # the reload's model configuration is kept there


def test_verbose_shows_the_third_party_lines_and_writes_no_log(store):
    spec, _ = store
    checked = _sweeper("summarize", spec, "--no-log", "--evaluate", "-v", cwd=spec.parent)
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert "INFO fairseq." in checked.stderr
    assert LOG_LINE not in checked.stderr
