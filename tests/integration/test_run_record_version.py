"""The record format version through the real `sweeper run` (`sweeper.tracking.record_format`).

A 2-trial dummy sweep records the current version on its new parent run. Tagged as a
newer sweeper would tag it, `--resume` exits 2 in one line naming both versions, and
creates nothing. Untagged, as every sweeper before the tag left it (version 1), a
`--resume` adding a seed runs, the parent run keeps its version, and the summary
counts the old and the new trials alike.
"""

from __future__ import annotations

import json

import pytest

from sweeper import record_names
from sweeper.tracking.record_format import RECORD_VERSION
from tests.support.sweeps import client_for, new_sweep, run_sweeper, runs_by_role

pytestmark = pytest.mark.integration


def test_a_newer_record_is_refused_and_a_version_1_record_resumes(tmp_path, tmp_path_factory):
    spec, out = new_sweep(tmp_path, tmp_path_factory, "recver")
    done = run_sweeper("run", spec)
    assert done.returncode == 0, done.stderr[-3000:]
    (parent,), trials = runs_by_role(out, "recver")
    assert parent.data.tags[record_names.TAG_RECORD_VERSION] == str(RECORD_VERSION)
    client = client_for(out)

    client.set_tag(parent.info.run_id, record_names.TAG_RECORD_VERSION, str(RECORD_VERSION + 1))
    refused = run_sweeper("run", spec, "grid.seed=[1,2,3]", "--resume", timeout=120)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    (line,) = [x for x in refused.stderr.splitlines() if x.startswith("error:")]
    assert f"record format version {RECORD_VERSION + 1}" in line
    assert f"this sweeper's version {RECORD_VERSION}" in line and "upgrade sweeper" in line
    assert "Traceback" not in refused.stderr
    assert len(runs_by_role(out, "recver")[1]) == len(trials) == 2  # nothing created

    client.delete_tag(parent.info.run_id, record_names.TAG_RECORD_VERSION)  # version 1
    resumed = run_sweeper("run", spec, "grid.seed=[1,2,3]", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (after,), trials = runs_by_role(out, "recver")
    assert after.info.run_id == parent.info.run_id
    assert record_names.TAG_RECORD_VERSION not in after.data.tags  # still version 1
    assert len(trials) == 3
    report = run_sweeper("summarize", spec, "grid.seed=[1,2,3]", "--format", "json", "--no-log")
    assert report.returncode == 0, report.stderr[-3000:]
    assert sorted(t["seed"] for t in json.loads(report.stdout)["trials"]) == [1, 2, 3]
