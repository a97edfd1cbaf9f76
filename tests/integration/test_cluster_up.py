"""`sweeper cluster up`, then Ray's own CLI, as docs/cluster.md tells a new user to do it.

One cluster for the module, in a temporary HOME where an embedded `sweeper run` has
left `~/.ray/auth_token` (what `make demo` leaves on a machine): `ray job submit` runs
with no RAY_AUTH_MODE at all. The job uploads a checkout holding the real
sweeps/demo.yaml (tiny overrides) whose output_dir is relative, so without the re-rooting
the sweep would land in Ray's temporary working-dir copy. Then `sweeper summarize` from
the checkout must find it; a job stopped with `ray job stop` and resubmitted with
--resume must finish only what did not; `down` must stop only what `up` started.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sweeper import record_names
from sweeper.deploy.state import running
from sweeper.tracking.links import FIRST_VIEW
from tests.support.cluster import RAY, SWEEPER, sweeper_cluster_up
from tests.support.processes import clean_env
from tests.support.reliability import record
from tests.support.sweeps import new_sweep, roles_in

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.2"  # Ray keeps a node address other than exactly 127.0.0.1 (see support)
TINY = [
    "grid.framework=[dummy]", "grid.init=[random]",
    "data.generate.train_size=80", "data.generate.valid_size=20",
    "data.generate.test_size=20", "data.generate.unlabeled_size=400",
    "data.generate.vocab_size=200", "model.arch.layers=1", "model.arch.embed_dim=16",
    "model.arch.ffn_dim=32", "model.arch.heads=2", "model.pretrain.steps=4",
    "model.pretrain.batch_size=8", "train.epochs=2", "train.lr=0.002",
]  # fmt: skip
SLOW_S3 = {"random-full-s3-": {"sleep_per_step": 1.0}}
"""Seed 3 of the stop/resume sweep takes 20 s: long enough to stop its job mid-trial."""


@dataclass
class Up:
    env: dict[str, str]
    home: Path
    state_file: Path
    checkout: Path
    storage: Path
    dashboard: str
    tracking: str

    def state(self) -> dict[str, object]:
        return json.loads(self.state_file.read_text())


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300):
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    root = tmp_path_factory.mktemp("cluster_up")
    home = root / "home"
    home.mkdir()
    env = clean_env(
        HOME=str(home),
        SWEEPER_HOME=str(root / "sweeper_home"),
        SWEEPER_DUMMY_EXTRA=json.dumps(SLOW_S3),
    )
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(name, None)  # the point: nothing but what `cluster up` set up

    # An embedded sweep leaves ~/.ray/auth_token behind, as `make demo` does.
    spec, _ = new_sweep(root / "embedded", tmp_path_factory, "embedded")
    embedded = _run([SWEEPER, "run", str(spec), "grid.seed=[1]"], env, root, timeout=240)
    assert embedded.returncode == 0, embedded.stdout[-2000:] + embedded.stderr[-2000:]
    assert (home / ".ray" / "auth_token").is_file()

    checkout = root / "checkout"
    (checkout / "sweeps").mkdir(parents=True)
    shutil.copy(REPO / "sweeps" / "demo.yaml", checkout / "sweeps" / "demo.yaml")
    storage = root / "storage"
    started, ports = sweeper_cluster_up(env, checkout, storage)
    state_file = root / "sweeper_home" / "cluster.json"
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        out = started.stdout
        assert f"http://{HOST}:{ports[1]}" in out and f"http://{HOST}:{ports[2]}" in out
        assert f"RAY_AUTH_MODE=disabled ray start --address {HOST}:{ports[0]}" in out
        assert f"ray job submit --address http://{HOST}:{ports[1]} --working-dir ." in out
        yield Up(
            env, home, state_file, checkout, storage,
            f"http://{HOST}:{ports[1]}", f"http://{HOST}:{ports[2]}",
        )  # fmt: skip
    finally:
        recorded = json.loads(state_file.read_text()) if state_file.exists() else None
        _run([SWEEPER, "cluster", "down"], env, checkout, timeout=120)
        for key in ("ray_pgid", "mlflow_pgid"):  # should be gone already: belt and braces
            if recorded and recorded[key] > 1:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(recorded[key], signal.SIGKILL)


def _trial_runs(tracking: str, experiment: str) -> list:
    from mlflow import MlflowClient

    return roles_in(MlflowClient(tracking), experiment)[1]


def _copies(up: Up) -> list[Path]:
    temp = Path(str(up.state()["ray_temp_dir"]))
    return list(temp.glob("session_*/runtime_resources/working_dir_files/_ray_pkg_*"))


def _assert_copies_hold_only_the_upload(up: Up) -> None:
    copies = _copies(up)
    assert copies, "the job ran from a working-dir copy"
    for copy in copies:  # nothing but the upload itself in Ray's temporary copy
        written = {p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()}
        assert written <= {"sweeps/demo.yaml"}, written


def test_ray_job_submit_with_no_auth_variables_leaves_a_durable_record(up: Up):
    submitted = _run(
        [RAY, "job", "submit", "--address", up.dashboard, "--working-dir", ".",
         "--", "sweeper", "run", "sweeps/demo.yaml", *TINY, "grid.seed=[1,2]"],
        up.env, up.checkout,
    )  # fmt: skip
    text = submitted.stdout + submitted.stderr
    assert submitted.returncode == 0, text[-4000:]
    assert "succeeded" in text
    assert f"output_dir -> {up.storage / 'runs' / 'demo'}" in text  # the driver said where
    assert (up.storage / "runs" / "demo" / "prepared").is_dir()
    assert not (up.checkout / "runs").exists()
    _assert_copies_hold_only_the_upload(up)  # (Ray may have emptied it since the job ended)

    # From the checkout: the running cluster's tracking server is the default store.
    summary = _run(  # the job's overrides: the same inputs, so its trials count
        [SWEEPER, "summarize", "sweeps/demo.yaml", *TINY, "--format", "csv"], up.env, up.checkout
    )
    assert summary.returncode == 0, summary.stderr[-3000:]
    table1 = summary.stdout.split("# table2")[0]
    names = {line.split(",")[1] for line in table1.splitlines()[2:] if line.strip()}
    assert names == {"dummy-random-full-s1", "dummy-random-full-s2"}, summary.stdout
    record(
        "cluster: a Ray job's record outlives Ray's working-dir copy; auth after an embedded sweep",
        "in a HOME where an embedded `sweeper run` had left ~/.ray/auth_token: `sweeper "
        "cluster up`, then `ray job submit --working-dir . -- sweeper run sweeps/demo.yaml` "
        "(2 trials, relative output_dir) with no RAY_AUTH_MODE in the client's environment",
        f"job succeeded; output_dir re-rooted to {up.storage.name}/runs/demo (printed by "
        "the driver), nothing written into Ray's copy but the upload; `sweeper summarize` "
        f"from the checkout printed both trials ({', '.join(sorted(names))})",
    )
    ui = _run([SWEEPER, "ui", "sweeps/demo.yaml"], up.env, up.checkout, timeout=60)
    assert ui.returncode == 0 and f"{up.tracking}/#/experiments/" in ui.stdout, ui.stdout
    link = re.search(r"MLflow UI: (\S+)", summary.stdout + submitted.stdout)  # run + summarize
    assert link and link.group(1).endswith(f"/runs?{FIRST_VIEW}"), link


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_job_stopped_then_resubmitted_with_resume_finishes_only_the_rest(up: Up):
    # An earlier test's `sweeper summarize` in the checkout left its log under runs/ (a
    # command's log lies beside the spec's outputs); the job would upload it.
    shutil.rmtree(up.checkout / "runs", ignore_errors=True)
    args = ["sweeps/demo.yaml", *TINY, "name=stopdemo", "grid.seed=[1,2,3]", "max_concurrent=1"]
    first = _run(
        [RAY, "job", "submit", "--no-wait", "--address", up.dashboard, "--working-dir", ".",
         "--", "sweeper", "run", *args],
        up.env, up.checkout,
    )  # fmt: skip
    assert first.returncode == 0, first.stdout + first.stderr
    job_id = re.search(r"raysubmit_\w+", first.stdout + first.stderr).group(0)
    deadline = time.monotonic() + 240
    while True:  # stop the job once seeds 1 and 2 are recorded and seed 3 is under way
        runs = _trial_runs(up.tracking, "stopdemo")
        done = [r for r in runs if r.info.status == "FINISHED"]
        if len(done) >= 2:
            break
        _assert_copies_hold_only_the_upload(up)  # checked while the job writes
        assert time.monotonic() < deadline, f"no two finished trials; runs: {runs}"
        time.sleep(1)
    copies = [c for c in _copies(up) if (c / "sweeps" / "demo.yaml").is_file()]
    assert copies, "the running job's copy holds its upload"
    _assert_copies_hold_only_the_upload(up)
    stopped = _run([RAY, "job", "stop", "--address", up.dashboard, job_id], up.env, up.checkout)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    status = _run([RAY, "job", "status", "--address", up.dashboard, job_id], up.env, up.checkout)
    assert "was stopped" in status.stdout + status.stderr
    before = {
        r.data.tags[record_names.TAG_TRIAL_KEY]: r for r in _trial_runs(up.tracking, "stopdemo")
    }
    assert len([r for r in before.values() if r.info.status == "FINISHED"]) == 2

    second = _run(
        [RAY, "job", "submit", "--address", up.dashboard, "--working-dir", ".",
         "--", "sweeper", "run", *args, "--resume"],
        up.env, up.checkout,
    )  # fmt: skip
    text = second.stdout + second.stderr
    assert second.returncode == 0, text[-4000:]
    assert re.search(r"3 trials \(2 finished before, \d to resume, \d new\)", text), text[-4000:]
    assert "-s1: started" not in text and "-s2: started" not in text  # only the rest ran
    runs = _trial_runs(up.tracking, "stopdemo")
    keys = [r.data.tags[record_names.TAG_TRIAL_KEY] for r in runs]
    assert len(keys) == 3 and len(set(keys)) == 3  # one run per trial key
    assert all(r.info.status == "FINISHED" for r in runs)
    for run in runs:  # the two finished before were not touched
        if before.get(run.data.tags[record_names.TAG_TRIAL_KEY], run).info.status == "FINISHED":
            assert run.info.run_id == before[run.data.tags[record_names.TAG_TRIAL_KEY]].info.run_id
    planned = re.search(r"3 trials \(2 finished before, \d to resume, \d new\)", text)
    record(
        "cluster: a Ray job stopped mid-sweep, then resubmitted with --resume",
        "`ray job stop` once 2 of 3 trials (1 at a time) had finished and the third was "
        "running; then `ray job submit ... -- sweeper run ... --resume`",
        f"first job 'was stopped'; second job exit 0, planned '{planned.group(0)}' "  # type: ignore[union-attr]
        "and started only the third; 3 keys with exactly one FINISHED run each, the 2 "
        "finished before kept their run ids",
    )


def test_status_refusal_and_down_stop_only_what_up_started(up: Up, tmp_path: Path):
    status = _run([SWEEPER, "cluster", "status"], up.env, up.checkout, timeout=60)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "1 alive" in status.stdout and "healthy" in status.stdout

    again = _run([SWEEPER, "cluster", "up", "--host", HOST], up.env, up.checkout, timeout=60)
    assert again.returncode == 2 and "still running" in again.stderr
    taken = _run(
        [SWEEPER, "cluster", "up", "--host", HOST, "--mlflow-port", up.tracking.rsplit(":", 1)[1]],
        {**up.env, "SWEEPER_HOME": str(tmp_path / "other_home")}, up.checkout, timeout=60,
    )  # fmt: skip
    assert taken.returncode == 2 and "is taken" in taken.stderr, taken.stderr

    state = up.state()
    temp_dir = str(state["ray_temp_dir"])
    ours = [p for p in _pids() if temp_dir.encode() in _cmdline(p)]
    ours += [p for p in _pids() if _pgid(p) in (state["ray_pgid"], state["mlflow_pgid"])]
    assert ours
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        down = _run([SWEEPER, "cluster", "down"], up.env, up.checkout, timeout=120)
        assert down.returncode == 0 and "cluster stopped" in down.stdout, down.stderr
        assert bystander.poll() is None  # not ours to stop
        left = [p for p in ours if running(p)]
        assert left == [], [_cmdline(p)[:200] for p in left]
        assert not up.state_file.exists()
        assert not Path(temp_dir).exists()
        twice = _run([SWEEPER, "cluster", "down"], up.env, up.checkout, timeout=60)
        assert twice.returncode == 0 and "no cluster to stop" in twice.stdout
        gone = _run([SWEEPER, "cluster", "status"], up.env, up.checkout, timeout=60)
        assert gone.returncode == 1 and "no cluster" in gone.stdout
    finally:
        bystander.kill()
        bystander.wait()


def _pids() -> list[int]:
    return [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return -1


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_token_auth_admits_only_clients_with_the_token(tmp_path: Path):
    """`--auth token` (the default off loopback), tried on loopback: `up` makes the
    token, Ray's CLI works with it and the printed mode, and is refused without it."""
    home, stranger = tmp_path / "home", tmp_path / "stranger"
    home.mkdir()
    stranger.mkdir()
    env = clean_env(HOME=str(home), SWEEPER_HOME=str(tmp_path / "sweeper_home"))
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(name, None)
    started, ports = sweeper_cluster_up(env, tmp_path, tmp_path / "storage", "--auth", "token")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"RAY_AUTH_MODE=token ray start --address {HOST}:{ports[0]}" in started.stdout
        assert (home / ".ray" / "auth_token").is_file()  # made by `up`, for every node
        dashboard = f"http://{HOST}:{ports[1]}"
        job = [RAY, "job", "submit", "--address", dashboard, "--", "python", "-c", "print(6*7)"]
        admitted = _run(job, {**env, "RAY_AUTH_MODE": "token"}, tmp_path, timeout=120)
        assert admitted.returncode == 0 and "42" in admitted.stdout, admitted.stderr[-3000:]
        refused = _run(job, {**env, "RAY_AUTH_MODE": "token", "HOME": str(stranger)}, tmp_path)
        assert refused.returncode != 0, refused.stdout[-2000:]
        assert "token" in (refused.stdout + refused.stderr).lower()
        status = _run([SWEEPER, "cluster", "status"], env, tmp_path, timeout=60)
        assert status.returncode == 0 and "auth: token" in status.stdout, status.stdout
        record(
            "cluster: token authentication",
            "`sweeper cluster up --auth token` in a HOME without a token; `ray job submit` "
            "with RAY_AUTH_MODE=token from that HOME, and from another HOME (no token)",
            "up made ~/.ray/auth_token and printed `RAY_AUTH_MODE=token ray start ...` for "
            f"workers; the job with the token ran (printed 42); without it, exit "
            f"{refused.returncode}, refused naming the token",
        )
    finally:
        down = _run([SWEEPER, "cluster", "down"], env, tmp_path, timeout=120)
        assert down.returncode == 0, down.stdout + down.stderr
