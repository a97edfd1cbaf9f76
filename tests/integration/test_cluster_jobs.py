"""`sweeper run` as a Ray job on a real `ray start --head` cluster (127.0.0.1).

Submitted twice, as people do it: with Ray's own `ray job submit` CLI and with
`sweeper submit` (the Jobs SDK). The job uploads only a small folder holding the spec;
the spec's output_dir is absolute, so the MLflow store the job writes is the one the
test reads. Either way the job must succeed and leave one FINISHED trial run per key.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweeper import record_names
from tests.support.cluster import RAY, SWEEPER, RayCluster, ray_cluster
from tests.support.sweeps import new_sweep, runs_by_role

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    with ray_cluster(tmp_path_factory.mktemp("ray_jobs_logs"), head_cpus=2) as running:
        yield running


def _job_folder(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder holding only the sweep file (what the job uploads)."""
    spec, _ = new_sweep(tmp_path, tmp_path_factory, name)
    folder = tmp_path / "job"
    folder.mkdir()
    shutil.move(spec, folder / "sweep.yaml")
    return folder


def _job_status(cluster: RayCluster, job_id: str) -> str:
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(cluster.dashboard, headers=cluster.headers())
    return str(client.get_job_status(job_id).value)


def _assert_recorded(out: Path, name: str) -> None:
    parents, trials = runs_by_role(out, name)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    keys = [t.data.tags[record_names.TAG_TRIAL_KEY] for t in trials]
    assert len(keys) == 2 and len(set(keys)) == 2  # grid.seed [1, 2]: one run per key
    for run in trials:
        assert run.info.status == "FINISHED", run.data.tags.get(record_names.TAG_ERROR)
        assert run.data.tags[record_names.TAG_STATUS] == record_names.Status.FINISHED


def test_ray_job_submit_runs_a_sweep(cluster, tmp_path, tmp_path_factory):
    folder = _job_folder(tmp_path, tmp_path_factory, "rayjob")
    started = time.monotonic()
    done = subprocess.run(
        [RAY, "job", "submit", "--address", cluster.dashboard, "--working-dir", str(folder),
         "--", "sweeper", "run", "sweep.yaml"],
        capture_output=True, text=True, env=cluster.env, timeout=240,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = re.search(r"Job '(raysubmit_\w+)'", done.stdout + done.stderr)
    assert found, done.stdout[-2000:]
    assert _job_status(cluster, found.group(1)) == "SUCCEEDED"
    assert "[2/2 done]" in done.stdout  # the job's own output came back through its logs
    _assert_recorded(tmp_path / "out", "rayjob")
    print(f"ray job submit: {elapsed:.1f}s")


def test_sweeper_submit_runs_a_sweep_and_follows_it(cluster, tmp_path, tmp_path_factory):
    folder = _job_folder(tmp_path, tmp_path_factory, "sdkjob")
    started = time.monotonic()
    done = subprocess.run(
        [SWEEPER, "submit", "sweep.yaml", "train.epochs=1", "--address", cluster.dashboard],
        capture_output=True, text=True, env=cluster.env, timeout=240, cwd=folder,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = re.search(
        r"submitted job (raysubmit_\w+): sweeper run sweep.yaml train.epochs=1", done.stdout
    )
    assert found, done.stdout[-2000:]
    job_id = found.group(1)
    assert f"ray job logs --address {cluster.dashboard} --follow {job_id}" in done.stdout
    assert f"job {job_id}: SUCCEEDED" in done.stdout
    assert _job_status(cluster, job_id) == "SUCCEEDED"
    _assert_recorded(tmp_path / "out", "sdkjob")
    _, trials = runs_by_role(tmp_path / "out", "sdkjob")
    assert {t.data.params["train.epochs"] for t in trials} == {"1"}  # the override travelled
    print(f"sweeper submit: {elapsed:.1f}s")
