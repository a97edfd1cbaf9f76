"""The record format version: a record written before the version tag (by 6f53b41, the
fixture tools/make_old_record.py wrote in tests/data/record_v1) still summarizes to
what its own code printed; a newer record is refused; upgrading is idempotent."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from sweeper import record_names
from sweeper.summarize.mlflow_reader import SummarizeError, records_of
from sweeper.tracking import record_format
from sweeper.tracking.record_format import RECORD_VERSION, RecordTooNew

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "record_v1"
EXPERIMENT = "oldrec"


def _old_store(tmp_path: Path) -> Path:
    """A copy of the fixture's store, read-only: reading an old record writes nothing."""
    db = tmp_path / "mlflow.db"
    shutil.copyfile(FIXTURE / "mlflow.db", db)
    db.chmod(0o444)
    return db


def _set_version(db: Path, version: str) -> None:
    """Tag the sweep run as a sweeper writing format `version` would have."""
    db.chmod(0o644)
    with sqlite3.connect(db) as connection:
        (parent,) = connection.execute(
            "SELECT run_uuid FROM tags WHERE key = ? AND value = ?",
            (record_names.TAG_ROLE, record_names.ROLE_SWEEP),
        ).fetchone()
        connection.execute(
            "INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)",
            (record_names.TAG_RECORD_VERSION, version, parent),
        )


def test_a_record_of_6f53b41_summarizes_as_6f53b41_summarized_it(tmp_path: Path):
    from sweeper.summarize import SummaryRequest, summarize
    from sweeper.summarize.tables import to_json

    db = _old_store(tmp_path)
    uri = f"sqlite:///{db}"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        tagged = connection.execute(
            "SELECT count(*) FROM tags WHERE key = ?", (record_names.TAG_RECORD_VERSION,)
        ).fetchone()[0]
    assert tagged == 0  # written before the tag: version 1, upgraded when read
    summary = json.loads(to_json(summarize(SummaryRequest(EXPERIMENT, uri))))
    expected = json.loads((FIXTURE / "summary.json").read_text(encoding="utf-8"))
    assert summary["tracking_uri"] == uri
    assert {**summary, "tracking_uri": "TRACKING_URI"} == expected
    assert len(summary["trials"]) == 6 and len(summary["comparisons"]) == 1


def _run(run_id: str, role: str, version: str | None = None, **tags: str) -> dict:
    tags = {record_names.TAG_ROLE: role, record_names.TAG_SWEEP: "s", **tags}
    if version is not None:
        tags[record_names.TAG_RECORD_VERSION] = version
    return {
        "run_id": run_id,
        "run_name": run_id,
        "status": "FINISHED",
        "start_time": 1,
        "end_time": 2,
        "tags": tags,
        "params": {},
        "metrics": {},
    }


def test_a_version_1_trial_run_is_filled_in_and_upgrading_again_changes_nothing():
    old_trial = {record_names.TAG_ROLE: record_names.ROLE_TRIAL}
    once = record_format.upgrade(1, old_trial, {"train.lr": "0.1"})
    assert once == (
        {**old_trial, record_names.TAG_VERSIONS: "{}"},
        {"train.lr": "0.1", record_names.PARAM_PRECISION: "fp32"},
    )
    assert record_format.upgrade(1, *once) == once
    current = (
        {**old_trial, record_names.TAG_VERSIONS: '{"torch":"2"}'},
        {record_names.PARAM_PRECISION: "bf16"},
    )
    assert record_format.upgrade(1, *current) == current  # a resume's new runs stay as written
    assert record_format.upgrade(RECORD_VERSION, old_trial, {}) == (old_trial, {})
    parent = {record_names.TAG_ROLE: record_names.ROLE_SWEEP}
    assert record_format.upgrade(1, parent, {}) == (parent, {})


NEW = {record_names.TAG_SWEEP: "new"}


def test_records_are_upgraded_by_their_sweeps_version():
    records = records_of(
        [
            _run("p", record_names.ROLE_SWEEP),
            _run("t", record_names.ROLE_TRIAL),
            _run("q", record_names.ROLE_SWEEP, str(RECORD_VERSION), **NEW),
            _run("u", record_names.ROLE_TRIAL, **NEW),
        ]
    )
    by_id = {r.run_id: r for r in records}
    assert (by_id["t"].precision, by_id["t"].versions) == ("fp32", "{}")
    assert (by_id["u"].precision, by_id["u"].versions) == ("", None)  # current: as written


def test_a_record_newer_than_the_code_is_refused_naming_both_versions():
    newer = RECORD_VERSION + 1
    with pytest.raises(RecordTooNew) as refused:
        record_format.check(newer, "s")
    message = str(refused.value)
    assert f"version {newer}" in message and f"version {RECORD_VERSION}" in message
    assert "upgrade sweeper" in message and "\n" not in message
    record_format.check(RECORD_VERSION, "s")
    with pytest.raises(SummarizeError, match="upgrade sweeper"):
        records_of([_run("p", record_names.ROLE_SWEEP, str(newer))])
    with pytest.raises(RecordTooNew, match="not a record format version"):
        record_format.version_of({record_names.TAG_RECORD_VERSION: "two"})


def test_summarize_of_a_newer_record_exits_2_with_one_line(tmp_path: Path):
    db = _old_store(tmp_path)
    _set_version(db, str(RECORD_VERSION + 1))
    done = subprocess.run(
        [sys.executable, "-m", "sweeper.cli.main", "summarize", "--experiment", EXPERIMENT,
         "--tracking-uri", f"sqlite:///{db}", "--no-log"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert f"record format version {RECORD_VERSION + 1}" in done.stderr
    assert "upgrade sweeper" in done.stderr


def test_a_new_sweep_run_carries_the_version_and_a_resumed_one_keeps_its_own(tmp_path: Path):
    from mlflow import MlflowClient

    from sweeper.tracking.sweep_run import open_sweep_run

    db = _old_store(tmp_path)
    db.chmod(0o644)
    client = MlflowClient(f"sqlite:///{db}")
    experiment_id = client.get_experiment_by_name(EXPERIMENT).experiment_id
    record_format.check_stored(client, experiment_id, EXPERIMENT)  # version 1: resumable
    resumed = open_sweep_run(client, experiment_id, SimpleNamespace(name=EXPERIMENT))
    assert record_names.TAG_RECORD_VERSION not in client.get_run(resumed).data.tags
    created = open_sweep_run(client, experiment_id, SimpleNamespace(name="fresh"))
    tags = client.get_run(created).data.tags
    assert tags[record_names.TAG_RECORD_VERSION] == str(RECORD_VERSION)
    client.set_tag(resumed, record_names.TAG_RECORD_VERSION, str(RECORD_VERSION + 1))
    with pytest.raises(RecordTooNew, match="upgrade sweeper"):
        record_format.check_stored(client, experiment_id, EXPERIMENT)
